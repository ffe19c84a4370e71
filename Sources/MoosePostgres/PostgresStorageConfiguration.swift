#if MoosePostgres
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Where a `PostgresSessionStorage` connects and how: endpoint, credentials, TLS, schema, pool,
/// notifications, migrations. Made from a URL in the form libpq users know:
///
/// ```
/// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE?sslmode=verify-full&sslrootcert=/etc/moose/db-ca.pem
/// postgresql://moose@db.internal/moose?schema=moose&listen_port=5432&connect_timeout=5
/// postgres://moose@/moose?host=/var/run/postgresql                       (a Unix socket folder)
/// ```
///
/// Parameters (anything else is refused, so a misspelt `sslmode` never silently weakens TLS):
///
/// | parameter | values | default |
/// |---|---|---|
/// | `sslmode` | `disable`, `prefer`, `require`, `verify-ca`, `verify-full` (libpq's meanings) | `verify-full`; `prefer` for loopback and Unix sockets |
/// | `sslrootcert` | a PEM file of the CA(s) to trust | the system's trust store |
/// | `schema` | the PostgreSQL schema holding Moose's tables (`[a-z_][a-z0-9_]*`, ≤ 48 bytes) | `moose` |
/// | `connect_timeout` | seconds (0.1…300): a connection attempt, and any one storage operation, waits at most this long | `10` |
/// | `pool_max` | connections in this process's pool (1…500) | `10` |
/// | `listen` | `on` / `off`: wake lease waiters with LISTEN/NOTIFY (polling is always the fallback) | `on` |
/// | `listen_host`, `listen_port` | where to LISTEN when `HOST:PORT` is a pooler in transaction mode (PgBouncer): PostgreSQL itself | the URL's host and port |
/// | `migrations` | `apply` (create and migrate the schema on first use) or `verify` (never run DDL; refuse an old schema) | `apply` |
/// | `host` | an absolute folder: connect through the Unix socket `FOLDER/.s.PGSQL.PORT` | — |
/// | `application_name` | sent to the server | `moose` |
///
/// The password is never part of `description` or any error: `redactedURL` shows `***`.
public struct PostgresStorageConfiguration: Sendable, CustomStringConvertible {
    /// How to protect the connection (libpq's `sslmode`).
    public enum TLSMode: String, Sendable, CaseIterable {
        /// Plain TCP.
        case disable
        /// TLS if the server offers it, unverified; plain otherwise.
        case prefer
        /// TLS required, the certificate not verified (protects against passive eavesdropping only).
        case require
        /// TLS required, the certificate chain verified against `rootCertificateFile` (or the system's
        /// roots); the name is not checked.
        case verifyCA = "verify-ca"
        /// TLS required, chain and name (DNS or IP subject alternative name) verified.
        case verifyFull = "verify-full"
    }

    /// A TCP host and port, or a Unix socket.
    public enum Endpoint: Sendable, Hashable {
        /// A TCP host name or IP address, and a port.
        case tcp(host: String, port: Int)
        /// The path of a Unix domain socket (`/var/run/postgresql/.s.PGSQL.5432`).
        case unixSocket(path: String)

        var text: String {
            switch self {
            case .tcp(let host, let port): (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
            case .unixSocket(let path): path
            }
        }
    }

    /// Whether the schema is created and migrated on first use.
    public enum Migrations: String, Sendable {
        /// Create the schema and apply missing migrations on first use (in one transaction, serialised
        /// across replicas with a transaction-level advisory lock).
        case apply
        /// Never run DDL: refuse a schema that is missing or older than this Moose expects.
        case verify
    }

    /// Where the pool connects.
    public var endpoint: Endpoint
    /// The database user.
    public var username: String
    /// The password (SCRAM or md5 authentication), if any. Never printed.
    public var password: String?
    /// The database.
    public var database: String
    /// The schema holding Moose's tables.
    public var schema: String = "moose"
    /// TLS to the database.
    public var tls: TLSMode
    /// A PEM file of trusted CA certificates for `verify-ca` / `verify-full` (and ignored otherwise).
    public var rootCertificateFile: String?
    /// The longest a connection attempt, and any one storage operation, may take (seconds).
    public var connectTimeout: TimeInterval = 10
    /// The most connections this process's pool opens.
    public var maximumConnections: Int = 10
    /// Whether lease waiters are woken by LISTEN/NOTIFY (they poll as well, in case a notification is lost).
    public var listens = true
    /// Where to LISTEN, when it is not `endpoint` (a pooler in transaction mode cannot deliver
    /// notifications: give PostgreSQL's own address here).
    public var listenEndpoint: Endpoint?
    /// Create and migrate the schema on first use, or only verify it.
    public var migrations: Migrations = .apply
    /// Sent to the server as `application_name`.
    public var applicationName = "moose"
    /// The longest a lease waiter sleeps between two attempts when no notification wakes it (seconds).
    public var pollInterval: TimeInterval = 1
    /// The longest a refresh lease lives between two renewals (seconds; the storage's `leaseLifetime`,
    /// which caps a coordinator's `leaseTTL`): how long a replica that vanished mid-refresh — a lost
    /// machine, a killed process — keeps the others waiting. A live holder renews every third of it.
    public var leaseLifetime: TimeInterval = 5

    /// A configuration from its parts. `tls` defaults as in a URL: `prefer` for loopback and Unix
    /// sockets, `verify-full` elsewhere.
    ///
    /// - Parameters:
    ///   - endpoint: a host and port, or a Unix socket.
    ///   - username: the role to connect as.
    ///   - password: its password; `nil`: none is sent.
    ///   - database: the database holding the schema.
    ///   - tls: the TLS mode; `nil` (the default): `prefer` for loopback and Unix sockets, `verify-full`
    ///     elsewhere.
    public init(endpoint: Endpoint, username: String, password: String?, database: String, tls: TLSMode? = nil) {
        self.endpoint = endpoint
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls ?? Self.defaultTLS(for: endpoint)
    }

    /// Parses a `postgres://` or `postgresql://` URL (see the type's documentation).
    ///
    /// - Throws: `PostgresStorageError.invalidConfiguration`, naming the part that is wrong (never the password).
    public init(url: String) throws(PostgresStorageError) {
        self = try URLParser.parse(url)
    }

    /// `true` when `text` looks like a PostgreSQL URL (`postgres://`, `postgresql://`).
    public static func isPostgresURL(_ text: String) -> Bool {
        let lower = text.prefix(16).lowercased()
        return lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://")
    }

    static func defaultTLS(for endpoint: Endpoint) -> TLSMode {
        switch endpoint {
        case .unixSocket: .prefer
        case .tcp(let host, _): isLoopback(host) ? .prefer : .verifyFull
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        let lower = host.lowercased()
        if lower == "localhost" || lower == "::1" || lower == "0:0:0:0:0:0:0:1" { return true }
        let parts = lower.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127"
            && parts.allSatisfy { part in
                !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isNumber) && (Int(part) ?? 256) < 256
            }
    }

    /// The URL with the password replaced by `***` (for messages and logs).
    public var redactedURL: String {
        var text = "postgres://" + URLParser.escape(username, allowed: URLParser.userAllowed)
        if password != nil { text += ":***" }
        switch endpoint {
        case .tcp: text += "@" + endpoint.text
        case .unixSocket: text += "@"
        }
        text += "/" + URLParser.escape(database, allowed: URLParser.userAllowed)
        var query = ["sslmode=\(tls.rawValue)"]
        if case .unixSocket(let path) = endpoint {
            query.append("host=" + URLParser.escape(path, allowed: URLParser.pathAllowed))
        }
        if schema != "moose" { query.append("schema=\(schema)") }
        return text + "?" + query.joined(separator: "&")
    }

    /// The redacted URL.
    public var description: String { redactedURL }

    /// The NOTIFY channel of this schema.
    var channel: String { "moose_leases_" + schema }

    /// Checks every field's bounds (also those set by hand after parsing).
    func validated() throws(PostgresStorageError) -> Self {
        func fail(_ message: String) -> PostgresStorageError {
            PostgresStorageError(PostgresStorageError.invalidConfiguration, message)
        }
        guard Self.isValidSchema(schema) else {
            throw fail("schema must match [a-z_][a-z0-9_]* and be at most 48 bytes")
        }
        guard !username.isEmpty, username.utf8.count <= 256, !username.utf8.contains(0) else {
            throw fail("the user name must be 1…256 bytes (postgres://USER@HOST/DATABASE)")
        }
        guard !database.isEmpty, database.utf8.count <= 256, !database.utf8.contains(0) else {
            throw fail("the database name must be 1…256 bytes (postgres://USER@HOST/DATABASE)")
        }
        if let password, password.utf8.count > 1024 || password.utf8.contains(0) {
            throw fail("the password is longer than 1024 bytes or contains NUL")
        }
        for endpoint in [endpoint] + (listenEndpoint.map { [$0] } ?? []) {
            switch endpoint {
            case .tcp(let host, let port):
                guard !host.isEmpty, host.utf8.count <= 255, (1...65535).contains(port) else {
                    throw fail("host must be 1…255 bytes and port 1…65535")
                }
            case .unixSocket(let path):
                guard path.hasPrefix("/"), path.utf8.count <= 107 else {
                    throw fail("a Unix socket path must be absolute and ≤ 107 bytes")
                }
            }
        }
        guard connectTimeout.isFinite, connectTimeout >= 0.1, connectTimeout <= 300 else {
            throw fail("connect_timeout must be 0.1…300 seconds")
        }
        guard (1...500).contains(maximumConnections) else { throw fail("pool_max must be 1…500") }
        guard pollInterval.isFinite, pollInterval >= 0.01, pollInterval <= 60 else {
            throw fail("the poll interval must be 0.01…60 seconds")
        }
        guard leaseLifetime.isFinite, leaseLifetime >= 0.5, leaseLifetime <= 86_400 else {
            throw fail("the lease lifetime must be 0.5…86400 seconds")
        }
        guard applicationName.utf8.count <= 63, !applicationName.utf8.contains(0) else {
            throw fail("application_name must be ≤ 63 bytes")
        }
        if let rootCertificateFile, rootCertificateFile.isEmpty || rootCertificateFile.utf8.contains(0) {
            throw fail("sslrootcert must name a file")
        }
        return self
    }

    static func isValidSchema(_ schema: String) -> Bool {
        let bytes = Array(schema.utf8)
        guard let first = bytes.first, bytes.count <= 48, first == 0x5F || (0x61...0x7A).contains(first) else {
            return false
        }
        return bytes.allSatisfy { $0 == 0x5F || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }
    }
}

/// A small, strict parser for PostgreSQL URLs (no Foundation URL: its error messages could echo
/// the password, and its leniency is not wanted for security settings).
enum URLParser {
    static let userAllowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~".utf8)
    static let pathAllowed = userAllowed.union("/".utf8)

    static func fail(_ message: String) -> PostgresStorageError {
        PostgresStorageError(PostgresStorageError.invalidConfiguration, message)
    }

    static func escape(_ text: String, allowed: Set<UInt8>) -> String {
        var out = ""
        for byte in text.utf8 {
            if allowed.contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out +=
                    "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// Percent-decodes `text`; `nil` for a malformed escape or invalid UTF-8.
    static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == 0x25 {
                guard let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        guard let string = String(validating: bytes, as: UTF8.self), !bytes.contains(0) else { return nil }
        return string
    }

    static func parse(_ url: String) throws(PostgresStorageError) -> PostgresStorageConfiguration {
        guard url.utf8.count <= 4096 else { throw fail("the database URL is longer than 4096 bytes") }
        guard PostgresStorageConfiguration.isPostgresURL(url), let schemeEnd = url.range(of: "://") else {
            throw fail("a database URL starts with postgres:// or postgresql://")
        }
        var rest = url[schemeEnd.upperBound...]
        var queryText: Substring = ""
        if let question = rest.firstIndex(of: "?") {
            queryText = rest[rest.index(after: question)...]
            rest = rest[..<question]
        }
        if rest.contains("#") { throw fail("a database URL has no #fragment") }
        var authority = rest
        var pathText: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            pathText = rest[rest.index(after: slash)...]
        }
        let (username, password, hostPort) = try userInfo(authority)
        let (host, port) = try hostAndPort(hostPort)
        guard let database = decode(pathText), !pathText.contains("/") else {
            throw fail("the path must be one database name (postgres://USER@HOST/DATABASE)")
        }
        let options = try URLOptions(try queryParameters(queryText))
        let endpoint: PostgresStorageConfiguration.Endpoint
        if let socketFolder = options.socketFolder {
            guard host == nil else { throw fail("give either a host in the URL or a host= socket folder, not both") }
            endpoint = .unixSocket(path: socketFolder + (socketFolder.hasSuffix("/") ? "" : "/") + ".s.PGSQL.\(port)")
        } else {
            endpoint = .tcp(host: host ?? "localhost", port: port)
        }
        var configuration = PostgresStorageConfiguration(
            endpoint: endpoint, username: username ?? "", password: password,
            database: database, tls: options.tls)
        for setting in options.settings { try setting(&configuration) }
        if options.listenHost != nil || options.listenPort != nil {
            switch endpoint {
            case .tcp(let host, let port):
                configuration.listenEndpoint = .tcp(host: options.listenHost ?? host, port: options.listenPort ?? port)
            case .unixSocket:
                configuration.listenEndpoint = .tcp(
                    host: options.listenHost ?? "localhost", port: options.listenPort ?? 5432)
            }
        }
        return try configuration.validated()
    }

    /// The user name and password before an authority's last `@` (percent-decoded), and the rest.
    private static func userInfo(_ authority: Substring) throws(PostgresStorageError) -> (String?, String?, Substring) {
        guard let at = authority.lastIndex(of: "@") else { return (nil, nil, authority) }
        let userInfo = authority[..<at]
        let hostPort = authority[authority.index(after: at)...]
        guard let colon = userInfo.firstIndex(of: ":") else {
            guard let user = decode(userInfo) else {
                throw fail("the user name in the URL is not valid percent-encoded UTF-8")
            }
            return (user, nil, hostPort)
        }
        guard let user = decode(userInfo[..<colon]), let secret = decode(userInfo[userInfo.index(after: colon)...])
        else {
            throw fail("the user name or password in the URL is not valid percent-encoded UTF-8")
        }
        return (user, secret, hostPort)
    }

    /// The host (`nil` when the URL names none: a socket folder parameter may) and the port (5432 unless given).
    private static func hostAndPort(_ hostPort: Substring) throws(PostgresStorageError) -> (String?, Int) {
        guard !hostPort.isEmpty else { return (nil, 5432) }
        var hostText = hostPort
        var portText: Substring? = nil
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw fail("an IPv6 host needs its closing ]") }
            hostText = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("unexpected text after the IPv6 host") }
                portText = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            hostText = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        }
        var port = 5432
        if let portText {
            guard portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(portText),
                (1...65535).contains(value)
            else {
                throw fail("the port must be a number 1…65535")
            }
            port = value
        }
        guard let decoded = decode(hostText), !decoded.isEmpty,
            decoded.unicodeScalars.allSatisfy({
                $0.isASCII && $0.value > 0x20 && $0.value < 0x7F && !"/?#@[]".unicodeScalars.contains($0)
            })
        else {
            throw fail("the host is not a valid host name or IP address")
        }
        return (decoded, port)
    }

    /// The query's NAME=VALUE pairs, percent-decoded, in order.
    private static func queryParameters(_ queryText: Substring) throws(PostgresStorageError) -> [(String, String)] {
        var parameters: [(String, String)] = []
        for pair in queryText.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = decode(parts[0]), let value = decode(parts[1]) else {
                throw fail("a URL parameter is not NAME=VALUE in valid percent-encoding")
            }
            parameters.append((name, value))
        }
        return parameters
    }

    /// What the URL's parameters set: each known one checked, an unknown one (or a password) refused.
    private struct URLOptions {
        var socketFolder: String? = nil
        var tls: PostgresStorageConfiguration.TLSMode? = nil
        var settings: [(inout PostgresStorageConfiguration) throws(PostgresStorageError) -> Void] = []
        var listenHost: String? = nil
        var listenPort: Int? = nil

        init(_ parameters: [(String, String)]) throws(PostgresStorageError) {
            for (name, value) in parameters { try set(name, value) }
        }

        private mutating func set(_ name: String, _ value: String) throws(PostgresStorageError) {
            switch name {
            case "sslmode":
                guard let mode = PostgresStorageConfiguration.TLSMode(rawValue: value) else {
                    throw fail("sslmode must be one of disable, prefer, require, verify-ca, verify-full")
                }
                tls = mode
            case "sslrootcert":
                settings.append { $0.rootCertificateFile = value }
            case "schema":
                settings.append { $0.schema = value }
            case "connect_timeout":
                guard value.utf8.count <= 12, let number = Double(value), number.isFinite else {
                    throw fail("connect_timeout must be a number of seconds")
                }
                settings.append { $0.connectTimeout = number }
            case "pool_max":
                guard value.utf8.count <= 4, let number = Int(value) else {
                    throw fail("pool_max must be a number 1…500")
                }
                settings.append { $0.maximumConnections = number }
            case "listen":
                guard value == "on" || value == "off" else { throw fail("listen must be on or off") }
                settings.append { $0.listens = value == "on" }
            case "listen_host":
                guard !value.isEmpty, value.utf8.count <= 255 else {
                    throw fail("listen_host must be a host name or address")
                }
                listenHost = value
            case "listen_port":
                guard value.utf8.count <= 5, let number = Int(value), (1...65535).contains(number) else {
                    throw fail("listen_port must be 1…65535")
                }
                listenPort = number
            case "migrations":
                guard let mode = PostgresStorageConfiguration.Migrations(rawValue: value) else {
                    throw fail("migrations must be apply or verify")
                }
                settings.append { $0.migrations = mode }
            case "host":
                guard value.hasPrefix("/") else {
                    throw fail("the host parameter must be an absolute Unix socket folder")
                }
                socketFolder = value
            case "application_name":
                settings.append { $0.applicationName = value }
            case "password":
                throw fail(
                    "put the password in the URL's user part (postgres://USER:PASSWORD@HOST/DB) or in PGPASSWORD, not in a parameter"
                )
            default:
                throw fail(
                    "unknown URL parameter \"\(String(name.prefix(40)))\" (known: sslmode, sslrootcert, schema, connect_timeout, pool_max, listen, listen_host, listen_port, migrations, host, application_name)"
                )
            }
        }
    }
}
#endif
