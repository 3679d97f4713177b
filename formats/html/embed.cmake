# Turns the page's CSS and JS into C++ raw string literals (html_assets.inc), so that
# report.html needs no files beside the binary. Run by formats/CMakeLists.txt:
#   cmake -DCSS=<report.css> -DJS=<report.js> -DJS_TIMELINE=<timeline.js> -DOUT=<html_assets.inc> -P embed.cmake
# kReportJs is the timeline's script, then the page's (which calls the timeline).
set(delimiter "tpasset")
set(text "// Generated from formats/html/ by embed.cmake; edit those files instead.\n")
foreach(pair "kReportCss;${CSS}" "kReportJs;${JS_TIMELINE};${JS}")
  list(GET pair 0 name)
  list(SUBLIST pair 1 -1 paths)
  set(body "")
  foreach(path IN LISTS paths)
    file(READ "${path}" part)
    string(APPEND body "${part}")
  endforeach()
  string(FIND "${body}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains )${delimiter}\", which would end the literal")
  endif()
  string(APPEND text "constexpr std::string_view ${name} = R\"${delimiter}(${body})${delimiter}\";\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
