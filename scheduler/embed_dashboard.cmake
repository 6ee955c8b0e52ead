# Turns scheduler/dashboard/index.html into a C++ source (run at build time, so editing the page rebuilds).
# A raw string literal keeps the page byte-for-byte; the delimiter must not occur in the page.
file(READ ${INPUT} ZPS_DASHBOARD_HTML)
string(FIND "${ZPS_DASHBOARD_HTML}" ")zpsdash\"" found)
if(NOT found EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )zpsdash\"")
endif()
file(WRITE ${OUTPUT}.tmp "// Generated from scheduler/dashboard/index.html by scheduler/embed_dashboard.cmake.\n"
  "#include \"scheduler/status_board.h\"\nnamespace zps {\nconst std::string& dashboardHtml() {\n"
  "  static const std::string* html = new std::string(R\"zpsdash(${ZPS_DASHBOARD_HTML})zpsdash\");\n"
  "  return *html;\n}\n}  // namespace zps\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
