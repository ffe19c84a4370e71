#if MoosePostgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import PostgresNIO

/// Schema-qualified table names (the schema name is validated: `[a-z_][a-z0-9_]*`).
struct Tables: Sendable {
    let schema: String
    var quotedSchema: String { "\"\(schema)\"" }
    var meta: String { "\(quotedSchema).meta" }
    var migrations: String { "\(quotedSchema).migrations" }
    var dataKeys: String { "\(quotedSchema).data_keys" }
    var sessions: String { "\(quotedSchema).sessions" }
    var leases: String { "\(quotedSchema).leases" }
}

/// How the storage reaches PostgreSQL: TLS settings made once, connection configurations for the
/// pool and for direct connections (first use, LISTEN), and the mapping of every failure to a
/// `PostgresStorageError` that is free of secrets.
struct Connector: Sendable {
    let configuration: PostgresStorageConfiguration
    let tls: TLSConfiguration?
    let logger: Logger

    init(_ configuration: PostgresStorageConfiguration, logger: Logger) throws(PostgresStorageError) {
        self.configuration = configuration
        self.logger = logger
        switch configuration.tls {
        case .disable:
            tls = nil
        case .prefer, .require:
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .none
            self.tls = tls
        case .verifyCA, .verifyFull:
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = configuration.tls == .verifyFull ? .fullVerification : .noHostnameVerification
            if let file = configuration.rootCertificateFile {
                do {
                    let certificates = try NIOSSLCertificate.fromPEMFile(file)
                    guard !certificates.isEmpty else {
                        throw PostgresStorageError(PostgresStorageError.invalidConfiguration, "")
                    }
                    tls.trustRoots = .certificates(certificates)
                } catch {
                    throw PostgresStorageError(
                        PostgresStorageError.invalidConfiguration,
                        "sslrootcert \(file): cannot read PEM certificates from it")
                }
            }
            self.tls = tls
        }
    }

    /// The pool's configuration.
    func clientConfiguration() -> PostgresClient.Configuration {
        var client: PostgresClient.Configuration
        switch configuration.endpoint {
        case .tcp(let host, let port):
            let mode: PostgresClient.Configuration.TLS
            switch configuration.tls {
            case .disable: mode = .disable
            case .prefer: mode = .prefer(tls ?? .makeClientConfiguration())
            default: mode = .require(tls ?? .makeClientConfiguration())
            }
            client = PostgresClient.Configuration(
                host: host, port: port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: mode)
        case .unixSocket(let path):
            client = PostgresClient.Configuration(
                unixSocketPath: path, username: configuration.username,
                password: configuration.password, database: configuration.database)
        }
        client.options.connectTimeout = .milliseconds(Int64(configuration.connectTimeout * 1000))
        client.options.maximumConnections = configuration.maximumConnections
        client.options.additionalStartupParameters = [("application_name", configuration.applicationName)]
        return client
    }

    /// A direct connection (outside the pool) to `endpoint`.
    func connect(to endpoint: PostgresStorageConfiguration.Endpoint) async throws -> PostgresConnection {
        var connection: PostgresConnection.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            let mode: PostgresConnection.Configuration.TLS
            switch configuration.tls {
            case .disable: mode = .disable
            case .prefer: mode = .prefer(try NIOSSLContext(configuration: tls ?? .makeClientConfiguration()))
            default: mode = .require(try NIOSSLContext(configuration: tls ?? .makeClientConfiguration()))
            }
            connection = PostgresConnection.Configuration(
                host: host, port: port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: mode)
        case .unixSocket(let path):
            connection = PostgresConnection.Configuration(
                unixSocketPath: path, username: configuration.username,
                password: configuration.password, database: configuration.database)
        }
        connection.options.connectTimeout = .milliseconds(Int64(configuration.connectTimeout * 1000))
        connection.options.additionalStartupParameters = [("application_name", configuration.applicationName)]
        return try await PostgresConnection.connect(
            configuration: connection, id: Int.random(in: 1...Int(Int32.max)), logger: logger)
    }

    // MARK: - Errors

    /// Whether `error` is worth retrying (the connection broke, the server restarts, a deadlock) and
    /// what it means, in words free of secrets.
    func classify(_ error: any Error, doing what: String) -> (transient: Bool, error: PostgresStorageError) {
        let url = configuration.redactedURL
        func unavailable(_ message: String, sqlState: String? = nil) -> PostgresStorageError {
            PostgresStorageError(PostgresStorageError.unavailable, "\(what) (\(url)): \(message)", sqlState: sqlState)
        }
        if let error = error as? PostgresStorageError { return (false, error) }
        if let error = error as? PostgresTransactionError,
            let cause = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError
        {
            return classify(cause, doing: what)
        }
        if error is DeadlineExceeded {
            return (
                false,
                unavailable(
                    "PostgreSQL did not answer within \(Self.seconds(configuration.connectTimeout)) (connect_timeout)")
            )
        }
        if error is CancellationError { return (false, unavailable("cancelled")) }
        if let error = error as? PSQLError {
            switch error.code {
            case .server:
                let state = error.serverInfo?[.sqlState] ?? "?????"
                let message = Self.clean(error.serverInfo?[.message] ?? "no message")
                if state.hasPrefix("08")
                    || ["57P01", "57P02", "57P03", "53300", "40001", "40P01", "55P03", "53400"].contains(state)
                {
                    return (true, unavailable("\(message) (SQLSTATE \(state))", sqlState: state))
                }
                if state.hasPrefix("28") {
                    return (
                        false, unavailable("the login was refused: \(message) (SQLSTATE \(state))", sqlState: state)
                    )
                }
                return (false, unavailable("\(message) (SQLSTATE \(state))", sqlState: state))
            case .sslUnsupported:
                return (
                    false,
                    unavailable("the server does not offer TLS, and sslmode=\(configuration.tls.rawValue) requires it")
                )
            case .connectionError, .failedToAddSSLHandler:
                if let underlying = error.underlying {
                    if underlying is NIOSSLError || String(reflecting: type(of: underlying)).contains("NIOSSL") {
                        return (false, unavailable("TLS failed: \(Self.clean(String(describing: underlying)))"))
                    }
                    return (true, unavailable("cannot connect: \(Self.clean(String(describing: underlying)))"))
                }
                return (true, unavailable("cannot connect"))
            case .serverClosedConnection, .clientClosedConnection, .uncleanShutdown:
                return (true, unavailable("the connection closed (\(error.code))"))
            case .saslError, .authMechanismRequiresPassword, .unsupportedAuthMechanism:
                return (false, unavailable("authentication failed (\(error.code)); check the user and password"))
            case .poolClosed:
                return (false, unavailable("the storage is shut down (its run() ended)"))
            default:
                return (false, unavailable("the connection failed (\(error.code))"))
            }
        }
        let typeName = String(reflecting: type(of: error))
        if typeName.contains("ConnectionPoolError") {
            // postgres-nio's pool: the circuit breaker tripped, or the pool shut down (run() ended).
            return (false, unavailable("no connection from the pool (\(Self.clean(String(describing: error))))"))
        }
        if error is PostgresDecodingError {
            return (
                false,
                PostgresStorageError(
                    PostgresStorageError.corrupt, "\(what) (\(url)): a column does not have the expected type")
            )
        }
        if error is NIOSSLError { return (false, unavailable("TLS failed: \(Self.clean(String(describing: error)))")) }
        if let error = error as? IOError {
            return (true, unavailable("cannot connect: \(Self.clean(error.description))"))
        }
        if typeName.contains("NIOConnectionError") || typeName.contains("ChannelError") {
            return (true, unavailable("cannot connect: \(Self.clean(String(describing: error)))"))
        }
        return (false, unavailable(Self.clean(String(describing: error))))
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() && value < 1e6 ? "\(Int(value)) s" : "\(value) s"
    }

    /// Control characters out, length bounded: server text is outside input.
    static func clean(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(300) {
            out.unicodeScalars.append(
                scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) ? " " : scalar)
        }
        return out
    }
}

extension PostgresRow {
    /// The row, after checking it has at least `count` columns: postgres-nio's `decode` traps on a
    /// shorter row, and what a server sends must never stop the process.
    func columns(_ count: Int) throws(PostgresStorageError) -> PostgresRow {
        guard self.count >= count else {
            throw PostgresStorageError(
                PostgresStorageError.corrupt, "a row from the database has \(self.count) columns, \(count) expected")
        }
        return self
    }
}
#endif
