// The built-in web page: a chat with the served model, the live speculative-decoding statistics
// and the launch configuration (docs/server.md, "The web page"). The page is
// src/server/web/index.html, embedded at build time; it talks to the server's own API only.
#pragma once

#include <string_view>

#include "server/http_types.h"
#include "server/server_args.h"

namespace tandem::server {

// The bytes of src/server/web/index.html (defined in a file generated at build time).
std::string_view web_page_html();

// The page as GET / and GET /index.html answer it: text/html with a Content-Security-Policy
// that allows nothing outside the page but requests to this server.
HttpResponse web_page_response();

// Adds GET / and GET /index.html, unless --disable-web-page. The page needs no API key (it
// holds no data; the API calls it makes do).
void add_web_page_routes(Router& r, const ServerArgs& args);

}  // namespace tandem::server
