// The umbrella module: `import Moose` gives every Moose library module.
@_exported public import MooseCrypto
@_exported public import MooseJWT
@_exported public import MooseHTTP
@_exported public import MooseSealing
@_exported public import MooseSecretStore
@_exported public import MooseURLSession
@_exported public import MooseOAuth
@_exported public import MooseOAuthSystem
@_exported public import MooseSQLiteStorage
// swift-http-types: `APIRequest.head` is an `HTTPRequest`, header fields are `HTTPFields`.
@_exported public import HTTPTypes
