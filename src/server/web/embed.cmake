# cmake -DIN=page.html -DOUT=page.cpp -DSYMBOL=name -P embed.cmake: writes a C++ file defining
# `std::string_view tandem::server::SYMBOL()` that returns IN's bytes, as one raw string literal.
# Run at build time (src/server/CMakeLists.txt), so editing IN rebuilds the binary.
file(READ "${IN}" content)
set(delim "tandem_embed")
string(FIND "${content}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains ')${delim}\"', which would end the raw string literal")
endif()
string(LENGTH "${content}" size)
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "// Generated from ${name} by embed.cmake; do not edit.\n"
  "#include <string_view>\n\n"
  "namespace tandem::server {\n\n"
  "std::string_view ${SYMBOL}() {\n"
  "  static constexpr char kData[] = R\"${delim}(${content})${delim}\";\n"
  "  return {kData, sizeof(kData) - 1};  // ${size} bytes\n"
  "}\n\n"
  "}  // namespace tandem::server\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
