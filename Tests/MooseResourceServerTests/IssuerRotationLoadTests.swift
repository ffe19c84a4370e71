import Foundation
import MooseHTTP
import MooseJWT
import MooseOAuth
import MooseResourceServer
import MooseTestSupport
import MooseURLSession
import Testing

/// Issue 41 §5: a resource server under load while a real issuer rotates its keys. A Glewlwyd instance of the
/// test's own (port 4596, a temporary state folder) and one `ResourceServer` whose `JWKSCache` fetches its
/// `jwks_uri` over libcurl (maximum age 10 s, cooldown 3 s); 20 clients get client-credentials tokens and
/// present them for a minute while the issuer replaces a key's material under the same kid, signs with a new
/// kid, is restarted with one kid withdrawn and a new one published, then signs with that one.
///
/// No token signed by a withdrawn key (or replaced material) is accepted later than the maximum age after the
/// withdrawal; every token signed by a published key is accepted within the cooldown of its key's first
/// appearance, and stays accepted; the fetch attempts are at most one per cooldown, and each reached the issuer.
/// A cache keeping keys past their maximum age fails it (tried with `maximumAge: 600`: the withdrawn key's kept
/// token still accepted 15 s after the withdrawal). About 70 s, so only with `MOOSE_ROTATION_LOAD=1` (a phase of
/// its own in tools/test).
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["MOOSE_ROTATION_LOAD"] == "1",
        "a minute of load: MOOSE_ROTATION_LOAD=1 runs it"))
struct IssuerRotationLoadTests {
    static let port = 4596
    static let resource = "https://api.moose.test"
    static let clients = 20
    static let duration: TimeInterval = 60
    static let cooldown: TimeInterval = 3
    static let maximumAge: TimeInterval = 10
    static let waitLimit: TimeInterval = 2
    /// What a bound may be exceeded by: a fetch's wait (`waitLimit`), a retry's pause, a crowded machine.
    static let slack: TimeInterval = 3

    /// One change of the issuer's keys at `at` seconds into the run (`setup.py rotate` arguments; none: no
    /// change), then, with `keep`, a token it then signs kept for the replayer.
    struct Step: Sendable {
        let at: TimeInterval
        let rotate: [String]
        let keep: Bool
    }

    static let steps = [
        Step(at: 2, rotate: [], keep: true), // signed by moose-rs256's first material
        Step(at: 6, rotate: ["--renew", "moose-rs256"], keep: true), // same kid, new material
        Step(at: 16, rotate: ["--add", "moose-rs256-b:RS256", "--sign", "moose-rs256-b"], keep: true), // a new kid
        // A real restart with new keys: moose-rs256 withdrawn, moose-es256-c published. Nothing signs with either
        // until the next step, and the kept token of the first moose-rs256 is no longer presented (RotationLoad's
        // retireAfter): only the maximum age tells the cache. So the next step comes later than that age (+ slack).
        Step(at: 26, rotate: ["--restart", "--withdraw", "moose-rs256", "--add", "moose-es256-c:ES256"], keep: false),
        Step(at: 45, rotate: ["--sign", "moose-es256-c"], keep: true) // the kid published earlier signs
    ]

    @Test(.timeLimit(.minutes(3)))
    func aResourceServerUnderLoadFollowsAnIssuerRotatingItsKeys() async throws {
        let glewlwyd: OwnGlewlwyd
        switch await OwnGlewlwyd.start(port: Self.port) {
        case .success(let started): glewlwyd = started
        case .failure(let error): try Test.cancel("Glewlwyd cannot run here: \(error)")
        }
        do {
            try await run(glewlwyd)
        } catch {
            await glewlwyd.stop()
            throw error
        }
        await glewlwyd.stop()
    }

    func run(_ glewlwyd: OwnGlewlwyd) async throws {
        let transport = URLSessionTransport()
        let discovery = try await transport.send(
            APIRequest(url: try #require(URL(string: glewlwyd.issuer + "/.well-known/openid-configuration"))))
        let document = try JSONValue(parsing: Array(discovery.body))
        let tokenEndpoint = try #require(document["token_endpoint"]?.stringValue.flatMap(URL.init(string:)))
        let jwksURL = try #require(document["jwks_uri"]?.stringValue.flatMap(URL.init(string:)))
        let initial = try JWKS(json: Array(try await transport.send(APIRequest(url: jwksURL)).body)).keys

        let counting = CountingTransport()
        let cache = JWKSCache(
            url: jwksURL, transport: counting, cooldown: Self.cooldown, maximumAge: Self.maximumAge,
            waitLimit: Self.waitLimit)
        let server = MooseResourceServer.ResourceServer(
            configuration: ResourceServerConfiguration(
                issuer: try #require(document["issuer"]?.stringValue), resource: Self.resource,
                algorithms: [.rs256, .es256, .eddsa]),
            keys: cache)
        let load = RotationLoad(
            server: server, tokenEndpoint: tokenEndpoint, transport: transport, url: Self.resource + "/items",
            duration: Self.duration, giveUp: Self.cooldown + Self.slack + 1,
            retireAfter: Self.maximumAge + Self.slack + 2)
        try load.publish(initial, began: load.start, returned: load.start, initial: true)

        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<Self.clients { group.addTask { await load.client() } }
            group.addTask { await load.replayer() }
            group.addTask { try await Self.rotate(glewlwyd, load) }
            try await group.waitForAll()
        }
        let elapsed = Date().timeIntervalSince(load.start)
        let attempts = await cache.fetchAttempts
        let answered = await cache.fetchCount
        let report = RotationReport(load.state.withLock { $0 }, start: load.start, end: load.end)
        report.print(attempts: attempts, answered: answered, elapsed: elapsed, fetches: counting.times)
        report.check()

        // Every attempt reached the issuer, and there was at most one per cooldown.
        #expect(counting.times.count == attempts)
        #expect(attempts <= Int(elapsed / Self.cooldown) + 1, "\(attempts) fetch attempts in \(elapsed) s")
        #expect(answered >= 1 && answered <= attempts)
    }

    /// Runs `steps` against the issuer, recording what it publishes after each and keeping tokens.
    static func rotate(_ glewlwyd: OwnGlewlwyd, _ load: RotationLoad) async throws {
        for step in steps {
            let wait = load.start.addingTimeInterval(step.at).timeIntervalSinceNow
            if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
            if !step.rotate.isEmpty {
                let began = Date()
                load.rotating(true)
                let published = try await glewlwyd.rotate(step.rotate)
                load.rotating(false)
                try load.publish(published.keys, began: began, returned: Date())
                let arguments = step.rotate.joined(separator: " ")
                print(
                    "rotation at \(rotationSeconds(began.timeIntervalSince(load.start))): \(arguments)"
                        + " in \(rotationSeconds(Date().timeIntervalSince(began))), signing \(published.signing)")
            }
            if step.keep {
                var token: String? = nil
                for _ in 0..<20 where token == nil {
                    token = await load.obtainToken()
                    if token == nil { try await Task.sleep(for: .milliseconds(100)) }
                }
                load.keep(try #require(token, "no token to keep after \(step.rotate)"))
            }
        }
    }
}

/// "1.23 s".
func rotationSeconds(_ value: TimeInterval) -> String { String(format: "%.2f s", value) }
