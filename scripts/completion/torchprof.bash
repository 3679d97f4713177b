# bash completion for torchprof and torchprof-run.
# Installed as share/bash-completion/completions/torchprof and .../torchprof-run.
# The tool answers from its own option definitions (cli/completion.h):
#   torchprof __complete CWORD WORD...
# prints the candidates, or one directive: ":dirs", ":files" or ":command N".

_torchprof() {
  local cur prev words cword
  if declare -F _get_comp_words_by_ref >/dev/null; then
    # Keep "wait=1,warmup=1", "nvtx:NAME" and "--opt=value" one word each.
    _get_comp_words_by_ref -n =: cur prev words cword
  else
    cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
  fi
  COMPREPLY=()
  local answer
  answer=$("${words[0]}" __complete "$cword" "${words[@]:0:cword}" "$cur" 2>/dev/null) || return
  case $answer in
    :dirs) COMPREPLY=($(compgen -d -- "$cur")) ;;
    :files) COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.@(tprof|json)' -- "$cur")) ;;
    ":command "*)
      local first=${answer#:command }
      if ((first == cword)); then
        COMPREPLY=($(compgen -c -- "$cur") $(compgen -f -- "$cur"))
      elif declare -F _command_offset >/dev/null; then
        _command_offset "$first"
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi ;;
    *)
      local IFS=$'\n'
      COMPREPLY=($answer)
      # The options that end in "=" or ":" wait for more (--max step_time_avg=, nvtx:).
      [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *[=:,] ]] && compopt -o nospace 2>/dev/null ;;
  esac
}

complete -o filenames -o bashdefault -F _torchprof torchprof torchprof-run
