import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseResourceServer
import MooseTestSupport
import MooseURLSession
import Synchronization

/// The resource server's transport to the issuer's `jwks_uri`: libcurl, counting the requests it sends (what
/// the issuer saw, to compare with `JWKSCache.fetchAttempts`).
final class CountingTransport: HTTPTransport {
    private let base = CurlTransport()
    private let sent = Mutex<[Date]>([])

    /// When each request was sent, answered or not.
    var times: [Date] { sent.withLock { $0 } }

    func send(_ request: APIRequest) async throws -> APIResponse {
        sent.withLock { $0.append(Date()) }
        return try await base.send(request)
    }
}

/// One key the issuer published, told apart from others under the same `kid` by its JWK thumbprint.
struct PublishedKey: Sendable {
    let kid: String
    let key: JWTKey
    /// Published when the test began.
    let initial: Bool
    /// When the rotation that withdrew it (or replaced its material) began and returned; `nil`: still published.
    var withdrawalBegan: Date? = nil
    var withdrawnAt: Date? = nil
}

/// What became of one access token: when it was had, and when the resource server accepted or refused it.
struct TokenUse: Sendable {
    let token: String
    let obtainedAt: Date
    /// A token the test kept to present again and again (`false`: a client's).
    let replayed: Bool
    var verifications = 0
    var firstAcceptedAt: Date? = nil
    var lastAcceptedAt: Date? = nil
    /// The first refusal after it had been accepted.
    var refusedAfterAcceptanceAt: Date? = nil
    /// The first refusal, and its reason.
    var firstRefusal: (at: Date, reason: String)? = nil
    var lastAccepted = false

    mutating func record(_ refusal: String?, at time: Date) {
        let accepted = refusal == nil
        verifications += 1
        lastAccepted = accepted
        if let refusal, firstRefusal == nil { firstRefusal = (time, refusal) }
        if accepted {
            if firstAcceptedAt == nil { firstAcceptedAt = time }
            lastAcceptedAt = time
        } else if firstAcceptedAt != nil, refusedAfterAcceptanceAt == nil {
            refusedAfterAcceptanceAt = time
        }
    }
}

/// Every request of the run, counted.
struct LoadCounters: Sendable {
    var tokenRequests = 0
    var tokenFailures = 0
    /// Why tokens were not given: what the token endpoint answered, or the transport's error, counted.
    var tokenFailureReasons: [String: Int] = [:]
    var verifications = 0
    var accepted = 0
    var refused = 0
    /// Refusals with 503 (`temporarilyUnavailable`: no usable keys at hand).
    var unavailable = 0
    /// The longest single `verify` call, in seconds.
    var longestVerification: TimeInterval = 0
}

/// Clients getting tokens from the issuer (client credentials) and presenting them to one resource server, a
/// replayer presenting kept tokens, and the record of it all: keys published, tokens used, counters.
final class RotationLoad: Sendable {
    /// How long a client uses an accepted token before it gets a new one.
    static let useFor: TimeInterval = 1
    /// Pauses between two verifications of an accepted token, of a refused one, and of the kept tokens.
    static let acceptedPause = Duration.milliseconds(50)
    static let refusedPause = Duration.milliseconds(200)
    static let replayPause = Duration.milliseconds(100)

    struct State: Sendable {
        var keys: [String: PublishedKey] = [:]
        var uses: [TokenUse] = []
        var kept: [(token: String, at: Date)] = []
        var counters = LoadCounters()
    }

    let server: MooseResourceServer.ResourceServer
    let tokenEndpoint: URL
    let transport: URLSessionTransport
    let url: String
    let start: Date
    let end: Date
    /// How long a client retries a token never accepted before it gives it up.
    let giveUp: TimeInterval
    /// How long after its key's withdrawal a kept token is still presented.
    let retireAfter: TimeInterval
    let state = Mutex(State())

    init(
        server: MooseResourceServer.ResourceServer, tokenEndpoint: URL, transport: URLSessionTransport,
        url: String, duration: TimeInterval, giveUp: TimeInterval, retireAfter: TimeInterval
    ) {
        self.server = server
        self.tokenEndpoint = tokenEndpoint
        self.transport = transport
        self.url = url
        self.giveUp = giveUp
        self.retireAfter = retireAfter
        start = Date()
        end = start.addingTimeInterval(duration)
    }

    var running: Bool { Date() < end && !Task.isCancelled }

    /// Records what the issuer publishes after a rotation that began at `began` and returned at `returned`:
    /// keys no longer published are withdrawn then, new ones added.
    func publish(_ jwks: [JWK], began: Date, returned: Date, initial: Bool = false) throws {
        var current: [String: PublishedKey] = [:]
        for jwk in jwks {
            let kid = jwk.keyID ?? ""
            current[kid + "#" + (try jwk.thumbprint())] = PublishedKey(
                kid: kid, key: try jwk.verificationKey(), initial: initial)
        }
        state.withLock { state in
            for (id, key) in state.keys where key.withdrawnAt == nil && current[id] == nil {
                state.keys[id]?.withdrawalBegan = began
                state.keys[id]?.withdrawnAt = returned
            }
            for (id, key) in current where state.keys[id] == nil { state.keys[id] = key }
        }
    }

    /// A client-credentials access token of `moose-service`, or `nil` (counted) when the issuer did not give one.
    func obtainToken() async -> String? {
        var failure: String? = nil
        var token: String? = nil
        do {
            token = try await Glewlwyd.serviceAccessToken(tokenEndpoint: tokenEndpoint, transport: transport).token
        } catch {
            failure = String(String(describing: error).prefix(60)) + (rotating ? ", during a rotation" : "")
        }
        state.withLock { state in
            state.counters.tokenRequests += 1
            if let failure {
                state.counters.tokenFailures += 1
                state.counters.tokenFailureReasons[failure, default: 0] += 1
            }
        }
        return token
    }

    /// Whether a rotation runs now (set by `rotating(_:)`).
    var rotating: Bool { rotationRunning.load(ordering: .relaxed) }
    private let rotationRunning = Atomic(false)

    /// Marks the time a rotation runs (token failures then are told apart).
    func rotating(_ value: Bool) { rotationRunning.store(value, ordering: .relaxed) }

    /// A token the replayer presents from now until the end.
    func keep(_ token: String) { state.withLock { $0.kept.append((token, Date())) } }

    /// Why the resource server refuses `token` now; `nil`: it accepts it (counted, timed).
    func verify(_ token: String) async -> String? {
        let began = ContinuousClock.now
        var unavailable = false
        var refusal: String? = nil
        do throws(ResourceServerRefusal) {
            _ = try await server.verify(
                authorizationHeader: "Bearer \(token)", dpopHeader: nil, method: "GET", url: url,
                requiredScopes: ["api.read"])
        } catch {
            unavailable = error.code == ResourceServerRefusal.temporarilyUnavailable
            refusal = "\(error.code): \(error.reason)"
        }
        let accepted = refusal == nil
        let elapsed = ContinuousClock.now - began
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        state.withLock { state in
            state.counters.verifications += 1
            if accepted { state.counters.accepted += 1 } else { state.counters.refused += 1 }
            if unavailable { state.counters.unavailable += 1 }
            state.counters.longestVerification = max(state.counters.longestVerification, seconds)
        }
        return refusal
    }

    /// One client until the end: a token, used for `useFor` once accepted (a refused one retried until
    /// accepted or `giveUp`, and given up at once when refused after it had been accepted), then the next.
    func client() async {
        while running {
            guard let token = await obtainToken() else {
                try? await Task.sleep(for: Self.refusedPause)
                continue
            }
            let obtainedAt = Date()
            var use = TokenUse(token: token, obtainedAt: obtainedAt, replayed: false)
            while running {
                let refusal = await verify(token)
                let now = Date()
                use.record(refusal, at: now)
                let age = now.timeIntervalSince(obtainedAt)
                if refusal == nil {
                    if age >= Self.useFor { break }
                    try? await Task.sleep(for: Self.acceptedPause)
                } else {
                    if use.firstAcceptedAt != nil || age >= giveUp { break }
                    try? await Task.sleep(for: Self.refusedPause)
                }
            }
            state.withLock { $0.uses.append(use) }
        }
    }

    /// Presents every kept token every `replayPause` until the end — one signed by a withdrawn key only until
    /// `retireAfter` past the withdrawal: a refused token makes the cache fetch again once per cooldown, and past
    /// that time only the maximum age is to tell the cache of the next withdrawal.
    func replayer() async {
        var uses: [TokenUse] = []
        var signers: [String?] = []
        while running {
            let (kept, keys) = state.withLock { ($0.kept, $0.keys) }
            for (token, at) in kept.dropFirst(uses.count) {
                uses.append(TokenUse(token: token, obtainedAt: at, replayed: true))
                signers.append(nil)
            }
            for index in uses.indices {
                if signers[index] == nil { signers[index] = RotationReport.signer(of: uses[index].token, among: keys) }
                let withdrawn = signers[index].flatMap { keys[$0]?.withdrawnAt }
                if let withdrawn, Date().timeIntervalSince(withdrawn) > retireAfter { continue }
                let refusal = await verify(uses[index].token)
                uses[index].record(refusal, at: Date())
            }
            try? await Task.sleep(for: Self.replayPause)
        }
        state.withLock { $0.uses.append(contentsOf: uses) }
    }
}
