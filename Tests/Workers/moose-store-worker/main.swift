// A child process for MooseSecretStore's multi-process tests (not shipped as a product).
//
//   moose-store-worker write STORE KEYFILE WORKER COUNT     put COUNT values, print "ok N" after each commit
//   moose-store-worker loop STORE KEYFILE WORKER            put values until killed, print "ok N" after each
//   moose-store-worker lease STORE KEYFILE NAME TTL HOLD    take the lease, print "acquired TOKEN T0 T1", hold
//                                                           HOLD seconds (forever if negative), release
//   moose-store-worker tokens STORE KEYFILE PROFILE TASKS  TASKS concurrent accessToken() calls through one
//                                                           RefreshCoordinator (public client, discovery over
//                                                           libcurl); print "token FINGERPRINT" per distinct token
//   moose-store-worker reach STORE KEYFILE PROFILE          a coordinator with SystemReachability: prints
//                                                           "status online|offline MS" on every change (MS: the
//                                                           wall clock in milliseconds when it was seen) and
//                                                           "refreshed FINGERPRINT" on every refresh; each
//                                                           "token" line on stdin asks for a token and prints
//                                                           "token FINGERPRINT MS" or "offline MS" or "error …"
//   moose-store-worker pg-tokens URL KEYFILE PROFILE TASKS [LEASE_TTL [DELAY]]
//                                                           the same against PostgreSQL (a replica with its own
//                                                           pool); DELAY seconds before the token request, after
//                                                           printing "refreshing" (a slow IdP, or a kill -9 target)
import MooseHTTP
import MooseOAuth
import MooseSQLiteStorage
import MooseSecretStore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func say(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

func nowMilliseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
}

let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    say("usage: moose-store-worker write|loop|lease STORE KEYFILE …")
    exit(2)
}
let command = arguments[1]
#if MoosePostgres
if command == "pg-tokens" {
    await postgresTokens(Array(arguments.dropFirst(2)))
    exit(0)
}
#endif
do {
    let store = try SecretStore(path: arguments[2], masterKey: .keyFile(arguments[3]))
    switch command {
    case "write", "loop":
        let worker = arguments[4]
        let count = command == "write" ? (Int(arguments[5]) ?? 0) : Int.max
        var index = 0
        while index < count {
            try store.put(
                Array("value \(worker) \(index) ".utf8) + [UInt8](repeating: UInt8(index % 251), count: 64),
                namespace: "worker-\(worker)", name: "item-\(index)")
            say("ok \(index)")
            index += 1
        }
    case "lease":
        let name = arguments[4]
        let ttl = Double(arguments[5]) ?? 1
        let hold = Double(arguments[6]) ?? 0
        let lease = try await store.acquireLease(name: name, ttl: ttl, timeout: 60, as: SessionLease.self)
        let start = nowMilliseconds()
        say("acquired \(lease.fencingToken) \(start)")
        if hold < 0 {
            while true { sleep(1) }
        }
        usleep(UInt32(hold * 1_000_000))
        let end = nowMilliseconds()
        let stillHeld = try store.isHeld(lease)
        try store.releaseLease(lease)
        say("released \(lease.fencingToken) \(start) \(end) \(stillHeld)")
    case "tokens":
        let profile = arguments[4]
        let tasks = Int(arguments[5]) ?? 1
        let sessions = EncryptedSessionStorage(store: store)
        guard let session = try sessions.loadNow(profile)?.session else { say("no session \(profile)"); exit(1) }
        let transport = CurlTransport()
        let metadata = try await Discovery(transport: transport).metadata(for: session.issuer)
        let client = OAuthClient(
            metadata: metadata, clientID: session.clientID, authentication: .none, transport: transport)
        let coordinator = RefreshCoordinator(key: profile, storage: sessions, current: session) {
            try await client.refresh($0)
        }
        let values = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<tasks { group.addTask { try await coordinator.accessToken().value } }
            var seen = Set<String>()
            for try await value in group { seen.insert(value) }
            return seen
        }
        for value in values.sorted() { say("token \(TokenSet.fingerprint(value))") }
    case "reach":
        let profile = arguments[4]
        let sessions = EncryptedSessionStorage(store: store)
        guard let session = try sessions.loadNow(profile)?.session else { say("no session \(profile)"); exit(1) }
        let reachability = SystemReachability()
        reachability.start()
        let statuses = reachability.updates()
        // Detached: the main actor is blocked in readLine().
        Task.detached { for await status in statuses { say("status \(status) \(nowMilliseconds())") } }
        let transport = CurlTransport()
        // A test harness on a loaded machine: a discovery that fails is tried again (three attempts in
        // all) — reachability, not discovery, is what this command is for.
        func discover() async throws -> ProviderMetadata {
            for attempt in 1..<3 {
                do { return try await Discovery(transport: transport).metadata(for: session.issuer) } catch {
                    say("discovery failed (attempt \(attempt)): \(error)")
                    try await Task.sleep(for: .seconds(1))
                }
            }
            return try await Discovery(transport: transport).metadata(for: session.issuer)
        }
        let metadata = try await discover()
        let client = OAuthClient(
            metadata: metadata, clientID: session.clientID, authentication: .none, transport: transport)
        var configuration = RefreshCoordinator.Configuration()
        configuration.reachability = reachability
        let coordinator = RefreshCoordinator(
            key: profile, storage: sessions, configuration: configuration, current: session
        ) {
            try await client.refresh($0)
        }
        let events = coordinator.events
        Task.detached {
            for await event in events {
                if case .refreshed = event, let token = coordinator.cachedAccessToken(minimumValidity: 0) {
                    say("refreshed \(TokenSet.fingerprint(token.value))")
                }
            }
        }
        say("ready")
        while let line = readLine() {
            guard line == "token" else { break }
            let started = nowMilliseconds()
            do {
                let token = try await coordinator.accessToken()
                say("token \(TokenSet.fingerprint(token.value)) \(nowMilliseconds() - started)")
            } catch let error as OAuthError where error.code == OAuthError.offline {
                say("offline \(nowMilliseconds() - started)")
            } catch {
                say("error \(error)")
            }
        }
        reachability.stop()
    default:
        say("unknown command \(command)")
        exit(2)
    }
} catch {
    say("error \(error)")
    exit(1)
}
