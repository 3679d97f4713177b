# Turns the page's CSS and JS into C++ raw string literals (html_assets.inc), so that
# report.html needs no files beside the binary. Run by formats/CMakeLists.txt:
#   cmake -DCSS=<report.css> -DJS=<report.js> -DOUT=<html_assets.inc> -P embed.cmake
set(delimiter "tpasset")
set(text "// Generated from formats/html/ by embed.cmake; edit those files instead.\n")
foreach(pair "kReportCss;${CSS}" "kReportJs;${JS}")
  list(GET pair 0 name)
  list(GET pair 1 path)
  file(READ "${path}" body)
  string(FIND "${body}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains )${delimiter}\", which would end the literal")
  endif()
  string(APPEND text "constexpr std::string_view ${name} = R\"${delimiter}(${body})${delimiter}\";\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
