# Writes OUT: C tables of CUPTI result names and runtime/driver callback names
# taken from the toolkit's own headers, so cuptiGetResultString and
# cuptiGetCallbackName answer for every value this header version defines.
# Usage: cmake -DINCLUDE_DIR=... -DOUT=... -P gen_cupti_tables.cmake

function(append_entries header regex prefix domain var)
  file(STRINGS "${header}" lines REGEX "${regex}")
  set(text "")
  foreach(line IN LISTS lines)
    if(line MATCHES "${prefix}([A-Za-z0-9_]+)[ \t]*=[ \t]*([0-9]+)")
      set(name "${CMAKE_MATCH_1}")
      set(value "${CMAKE_MATCH_2}")
      if(NOT name STREQUAL "INVALID" AND NOT name STREQUAL "SIZE")
        string(APPEND text "  {${domain}, ${value}u, \"${name}\"},\n")
      endif()
    endif()
  endforeach()
  set(${var} "${${var}}${text}" PARENT_SCOPE)
endfunction()

set(names "")
append_entries("${INCLUDE_DIR}/cupti_runtime_cbid.h" "CUPTI_RUNTIME_TRACE_CBID_[A-Za-z0-9_]+ *= *[0-9]+"
               "CUPTI_RUNTIME_TRACE_CBID_" 2 names)
append_entries("${INCLUDE_DIR}/cupti_driver_cbid.h" "CUPTI_DRIVER_TRACE_CBID_[A-Za-z0-9_]+ *= *[0-9]+"
               "CUPTI_DRIVER_TRACE_CBID_" 1 names)

set(results "")
file(STRINGS "${INCLUDE_DIR}/cupti_result.h" lines REGEX "CUPTI_[A-Z0-9_]+ *= *[0-9]+")
foreach(line IN LISTS lines)
  if(line MATCHES "(CUPTI_[A-Z0-9_]+)[ \t]*=[ \t]*([0-9]+)")
    set(name "${CMAKE_MATCH_1}")
    set(value "${CMAKE_MATCH_2}")
    if(NOT name MATCHES "FORCE_INT")
      string(APPEND results "  {${value}u, \"${name}\"},\n")
    endif()
  endif()
endforeach()

set(content "// Generated from the CUPTI headers by gen_cupti_tables.cmake.\n")
string(APPEND content "struct CallbackName { unsigned domain; unsigned cbid; const char* name; };\n")
string(APPEND content "static const CallbackName kCallbackNames[] = {\n${names}};\n")
string(APPEND content "struct ResultName { unsigned result; const char* name; };\n")
string(APPEND content "static const ResultName kResultNames[] = {\n${results}};\n")
file(WRITE "${OUT}.tmp" "${content}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
