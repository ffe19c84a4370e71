#if MoosePostgres
import MooseHTTP
import MooseOAuth
import MoosePostgres
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The real transport, with `delay` seconds before each token request (after saying "refreshing"):
/// a slow identity provider, or the moment a test kills this process.
final class DelayedTokenTransport: HTTPTransport {
    let inner: any HTTPTransport
    let delay: Double

    init(_ inner: any HTTPTransport, delay: Double) {
        self.inner = inner
        self.delay = delay
    }

    func send(_ request: APIRequest) async throws -> APIResponse {
        if (request.url?.path ?? "").hasPrefix("/token") {
            say("refreshing")
            if delay > 0 { try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000)) }
        }
        return try await inner.send(request)
    }
}

/// `pg-tokens URL KEYFILE PROFILE TASKS [LEASE_TTL [DELAY]]`: one replica — its own pool and
/// coordinator — asking for a token from TASKS tasks at once. Prints "token FINGERPRINT" per
/// distinct token, or "error CODE: message" (never a token or the URL's password).
func postgresTokens(_ arguments: [String]) async {
    guard arguments.count >= 4, let tasks = Int(arguments[3]), tasks > 0 else {
        say("usage: moose-store-worker pg-tokens URL KEYFILE PROFILE TASKS [LEASE_TTL [DELAY]]")
        exit(2)
    }
    let profile = arguments[2]
    var configuration = RefreshCoordinator.Configuration()
    if arguments.count > 4, let ttl = Double(arguments[4]), ttl > 0 { configuration.leaseTTL = ttl }
    let delay = arguments.count > 5 ? (Double(arguments[5]) ?? 0) : 0
    do {
        let settings = try PostgresStorageConfiguration(url: arguments[0])
        try await PostgresSessionStorage.withRunning(settings, masterKey: .keyFile(arguments[1])) { storage in
            guard let session = try await storage.load(profile)?.session else {
                say("error noSession: no session \(profile)")
                exit(1)
            }
            let transport = DelayedTokenTransport(CurlTransport(), delay: delay)
            let metadata = try await Discovery(transport: transport).metadata(for: session.issuer)
            let client = OAuthClient(
                metadata: metadata, clientID: session.clientID, authentication: .none, transport: transport)
            let coordinator = RefreshCoordinator(
                key: profile, storage: storage, configuration: configuration, current: session
            ) {
                try await client.refresh($0)
            }
            let values = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<tasks { group.addTask { try await coordinator.accessToken().value } }
                var seen = Set<String>()
                for try await value in group { seen.insert(value) }
                return seen
            }
            if await coordinator.hasPendingWrite, await !coordinator.persistPendingWrite(timeout: 10) {
                say("error pendingWrite: the rotated tokens could not be written")
                exit(1)
            }
            for value in values.sorted() { say("token \(TokenSet.fingerprint(value))") }
        }
    } catch let error as OAuthError {
        say("error \(error.code): \(error.message)")
        exit(1)
    } catch {
        say("error \(error)")
        exit(1)
    }
}
#endif
