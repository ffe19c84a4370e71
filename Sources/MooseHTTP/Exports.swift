// The HTTP vocabulary of MooseHTTP's public API (`HTTPRequest.Method`, `HTTPFields`, `HTTPField.Name`,
// `HTTPResponse.Status`) comes from apple/swift-http-types; it is re-exported so that an app that
// imports MooseHTTP (or Moose) can write an `Endpoint` with `var method: HTTPRequest.Method { .post }`
// without importing HTTPTypes or naming swift-http-types in its own manifest.
@_exported public import HTTPTypes
