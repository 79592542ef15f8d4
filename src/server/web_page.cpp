#include "server/web_page.h"

namespace tandem::server {

HttpResponse web_page_response() {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(web_page_html());
  // Inline script and style only, requests to this origin only, never framed by another site.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'unsafe-inline'; "
                         "style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
                         "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  // A new binary may bring a new page: browsers check before reusing theirs.
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

void add_web_page_routes(Router& r, const ServerArgs& args) {
  if (args.disable_web_page) return;
  const auto page = [](const HttpRequest&) { return web_page_response(); };
  r.add("GET", "/", page, /*needs_api_key=*/false);
  r.add("GET", "/index.html", page, /*needs_api_key=*/false);
}

}  // namespace tandem::server
