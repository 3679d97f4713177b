# bash completion for torchprof and torchprof-run.
# Installed as share/bash-completion/completions/torchprof and .../torchprof-run.
# Options are read from the tool's own --help (once per command and session), so
# they stay right as options are added.

_torchprof_options() {
  # $1: the command line that prints the help, e.g. "torchprof report"
  local key=${1//[^A-Za-z0-9_\/]/_}
  local cache_var="_torchprof_opts_${key##*/}"
  if [[ -z ${!cache_var-} ]]; then
    local text
    text=$(LC_ALL=C $1 --help 2>/dev/null) || text=""
    printf -v "$cache_var" '%s' "$(grep -oE -- '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' <<<"$text" |
      sed -E 's/^[ ,]+//' | sort -u | tr '\n' ' ')"
  fi
  printf '%s' "${!cache_var}"
}

# Values of the options that take a fixed set; 0 when it completed something.
_torchprof_values() {
  local prev=$1 cur=$2
  case $prev in
    --sort)
      COMPREPLY=($(compgen -W "cpu_time cuda_time cpu_time_total cuda_time_total self_cpu_time_total
        self_cuda_time_total cpu_memory_usage cuda_memory_usage self_cpu_memory_usage
        self_cuda_memory_usage count" -- "$cur")) ;;
    --log-level)
      COMPREPLY=($(compgen -W "trace debug info warn error off" -- "$cur")) ;;
    --format)
      # report also writes folded stacks; diff does not.
      local formats="table csv json markdown"
      [[ ${sub-} == report ]] && formats+=" folded"  # the caller's subcommand
      COMPREPLY=($(compgen -W "$formats" -- "$cur")) ;;
    --metric)
      COMPREPLY=($(compgen -W "cpu_time_total self_cpu_time_total cuda_time_total self_cuda_time_total
        cpu_time cuda_time count" -- "$cur")) ;;
    --capture-range)
      COMPREPLY=($(compgen -W "none cudaProfilerApi nvtx:" -- "$cur")) ;;
    --trace)
      COMPREPLY=($(compgen -W "nvtx cuda gpu memory python" -- "${cur##*,}"))
      [[ $cur == *,* ]] && COMPREPLY=("${COMPREPLY[@]/#/${cur%,*},}") ;;
    --schedule)
      COMPREPLY=($(compgen -W "wait=1,warmup=1,active=3 wait=1,warmup=1,active=3,repeat=1" -- "$cur")) ;;
    -o|--output)
      COMPREPLY=($(compgen -d -- "$cur")) ;;
    --step-marker|--worker-name|--row-limit|--threshold|--straggler-threshold|--min-time|--max|--min)
      COMPREPLY=() ;;
    *) return 1 ;;
  esac
  return 0
}

_torchprof_run_args() {
  # $1: the help command; $2: index of the first word after the command name
  local help_cmd=$1 first=$2 i prog=""
  # Once the program is named (or after --), everything belongs to it.
  for ((i = first; i < cword; i++)); do
    if [[ ${words[i]} == -- ]]; then prog=$((i + 1)); break; fi
    if [[ ${words[i]} != -* ]] && ! _torchprof_takes_value "${words[i - 1]}"; then prog=$i; break; fi
  done
  if [[ -n $prog ]]; then
    if ((prog == cword)); then
      COMPREPLY=($(compgen -c -- "$cur") $(compgen -f -- "$cur"))
    elif declare -F _command_offset >/dev/null; then
      _command_offset "$prog"
    else
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return
  fi
  _torchprof_values "$prev" "$cur" && return
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_torchprof_options "$help_cmd")" -- "$cur"))
  else
    COMPREPLY=($(compgen -c -- "$cur") $(compgen -f -- "$cur"))
  fi
}

_torchprof_takes_value() {
  case $1 in
    -o|--output|--sort|--row-limit|--schedule|--step-marker|--worker-name|--log-level|--trace|\
    --capture-range|--format|--metric|--threshold|--straggler-threshold|--min-time|--max|--min) return 0 ;;
  esac
  return 1
}

_torchprof() {
  local cur prev words cword
  if declare -F _get_comp_words_by_ref >/dev/null; then
    # Keep "wait=1,warmup=1" and "nvtx:NAME" one word each.
    _get_comp_words_by_ref -n =: cur prev words cword
  else
    cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
  fi
  local tool=${words[0]}
  COMPREPLY=()
  if [[ ${tool##*/} == torchprof-run ]]; then
    _torchprof_run_args "$tool" 1
    return
  fi
  local sub="" i
  for ((i = 1; i < cword; i++)); do
    [[ ${words[i]} != -* ]] && { sub=${words[i]}; break; }
  done
  if [[ -z $sub ]]; then
    COMPREPLY=($(compgen -W "run report diff check --help --version" -- "$cur"))
    return
  fi
  case $sub in
    run) _torchprof_run_args "$tool run" $((i + 1)) ;;
    report | diff | check)
      _torchprof_values "$prev" "$cur" && return
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_torchprof_options "$tool $sub")" -- "$cur"))
      else
        # Run directories, captures and summary.json files.
        COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.@(tprof|json)' -- "$cur"))
      fi ;;
  esac
}

complete -o filenames -o bashdefault -F _torchprof torchprof torchprof-run
