#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseHTTP
public import MooseJWT
import MooseCrypto
import Logging

/// A provider's signing keys (its `jwks_uri`), cached, and followed as the provider changes them.
///
/// - The set has a maximum age: the response's `Cache-Control: max-age`, kept between `cooldown` and one
///   day (`no-store`, `no-cache`, none or an unreadable one: `maximumAge`, 10 minutes by default). Past
///   it, the next use fetches the set again, so a key the provider withdrew stops being trusted within
///   that age.
/// - A token naming a `kid` the set lacks, and a signature that does not verify with the cached keys
///   (`keysAfterFailedVerification(for:)`: the provider replaced a key's material under the same `kid`),
///   fetch the set again at once — when the last fetch attempt is at least `cooldown` old.
/// - At most one fetch attempt is made per `cooldown`, whatever it answered (a failure starts the
///   cooldown too), and one fetch is shared by all concurrent callers. While fetches fail, the last good
///   set keeps serving up to `staleLimit` past its maximum age; without a good set, the cached failure is
///   thrown at once until the cooldown has passed.
/// - A caller holding a usable set waits at most `waitLimit` for a fetch, then goes on with the keys at
///   hand; the fetch carries on and its answer is adopted when it comes.
///
/// The cooldown is what bounds the fetches tokens can cause, so a made-up `kid` sent right before a real
/// rotation delays the new key by at most one cooldown (30 s by default, as panva/jose's
/// `createRemoteJWKSet`).
public actor JWKSCache {
    /// Where a cache keeps its last JWKS document between runs (the CLI uses the secret store).
    public struct Persistence: Sendable {
        /// One kept key set: the document as fetched, when, and the maximum age it was given.
        public struct Record: Sendable, Equatable {
            /// The JWKS document, the bytes the provider answered.
            public var document: [UInt8]
            /// When it was fetched.
            public var fetchedAt: Date
            /// The maximum age, in seconds, the cache gave it (its `Cache-Control: max-age`, bounded);
            /// `nil`: not kept (the cache's `maximumAge` is used).
            public var maximumAge: TimeInterval?

            /// A record of `document`, fetched at `fetchedAt`, with `maximumAge` (`nil`: unknown).
            public init(document: [UInt8], fetchedAt: Date, maximumAge: TimeInterval? = nil) {
                self.document = document
                self.fetchedAt = fetchedAt
                self.maximumAge = maximumAge
            }
        }

        /// Returns the saved record, if any (a kept document past its maximum age is only fetched again
        /// on use, and serves as the last good set while fetches fail).
        public var loadRecord: @Sendable () -> Record?
        /// Saves a freshly fetched record.
        public var saveRecord: @Sendable (Record) -> Void

        /// Returns the saved document and when it was fetched, if any (`loadRecord` without its maximum age).
        public var load: @Sendable () -> (document: [UInt8], fetchedAt: Date)? {
            get {
                let loadRecord = self.loadRecord
                return { loadRecord().map { (document: $0.document, fetchedAt: $0.fetchedAt) } }
            }
            set {
                loadRecord = { newValue().map { Record(document: $0.document, fetchedAt: $0.fetchedAt) } }
            }
        }

        /// Saves a freshly fetched document and its fetch time (`saveRecord` without the maximum age).
        public var save: @Sendable ([UInt8], Date) -> Void {
            get {
                let saveRecord = self.saveRecord
                return { document, fetchedAt in saveRecord(Record(document: document, fetchedAt: fetchedAt)) }
            }
            set { saveRecord = { newValue($0.document, $0.fetchedAt) } }
        }

        /// A persistence keeping the document and its fetch time only: a loaded set gets the cache's
        /// `maximumAge`.
        public init(
            load: @escaping @Sendable () -> (document: [UInt8], fetchedAt: Date)?,
            save: @escaping @Sendable ([UInt8], Date) -> Void
        ) {
            self.loadRecord = { load().map { Record(document: $0.document, fetchedAt: $0.fetchedAt) } }
            self.saveRecord = { save($0.document, $0.fetchedAt) }
        }

        /// A persistence keeping whole records, the maximum age with the document.
        public init(loadRecord: @escaping @Sendable () -> Record?, saveRecord: @escaping @Sendable (Record) -> Void) {
            self.loadRecord = loadRecord
            self.saveRecord = saveRecord
        }
    }

    /// The longest maximum age a response's `Cache-Control` can give the set: one day.
    public static let maximumAgeCap: TimeInterval = 86_400

    private struct Fetched: Sendable {
        let keys: [JWTKey]
        let document: [UInt8]
        let maximumAge: TimeInterval?
    }

    private struct Waiter {
        let continuation: CheckedContinuation<Void, Never>
        let timer: Task<Void, Never>?
    }

    private struct Flight {
        let id: UInt64
        var waiters: [UInt64: Waiter] = [:]
    }

    private enum Freshness {
        /// No good set.
        case none
        /// Younger than its maximum age.
        case fresh
        /// Past its maximum age, within the stale limit: fetched again, and used while that fails.
        case stale
        /// Past the stale limit: not used.
        case expired
    }

    private let url: URL
    private let transport: any HTTPTransport
    private let cooldown: TimeInterval
    private let defaultMaximumAge: TimeInterval
    private let staleLimit: TimeInterval
    private let waitLimit: TimeInterval
    private let persistence: Persistence?
    private let now: @Sendable () -> Date

    private var keys: [JWTKey] = []
    /// The document `keys` were read from: a fetch answering the same bytes keeps `keys` as they are, so a
    /// resource server's remembered tokens (tied to the key values that verified them) outlive a refetch of
    /// an unchanged set.
    private var document: [UInt8] = []
    /// When the current good set was fetched; `nil`: none.
    private var fetchedAt: Date? = nil
    private var maximumAge: TimeInterval
    /// When the last fetch attempt started (while it runs) or ended: the cooldown runs from it.
    private var lastAttempt: Date? = nil
    /// The last attempt's failure; `nil` when it succeeded.
    private var lastFailure: OAuthError? = nil
    private var keptSetLoaded = false
    private var flight: Flight? = nil
    private var nextID: UInt64 = 0

    /// How many fetches answered a usable key set (for tests and diagnostics).
    public private(set) var fetchCount = 0
    /// How many fetches were started, whatever they answered (failures included): what the endpoint saw.
    public private(set) var fetchAttempts = 0

    /// A cache for `url`; with `persistence`, it starts from the saved document (no fetch at start-up
    /// while the saved set is younger than its maximum age and knows the token's `kid`) and saves each
    /// new one.
    ///
    /// - Parameters:
    ///   - url: the provider's `jwks_uri`.
    ///   - transport: what fetches it (15 s timeout, no retries).
    ///   - cooldown: the least number of seconds between two fetch attempts (default 30), so tokens naming
    ///     made-up keys or carrying bad signatures cannot make it fetch on every call, nor can a failing
    ///     endpoint. Not a finite non-negative number: 30.
    ///   - persistence: where the last document is kept between runs; `nil` (the default): memory only.
    ///   - maximumAge: the set's maximum age, in seconds, when the response gives none (default 600); at
    ///     least `cooldown`.
    ///   - staleLimit: how long past its maximum age the last good set keeps serving while fetches fail,
    ///     in seconds (default 86 400: one day); beyond it, the fetch failure is thrown.
    ///   - waitLimit: how long, in seconds of real time, a caller holding a usable set waits for a fetch
    ///     before it goes on with that set (default 2, at most 60); without one, a caller waits for the
    ///     fetch's answer.
    ///   - now: the clock ages and cooldowns are measured with; default: the system's.
    public init(
        url: URL, transport: any HTTPTransport, cooldown: TimeInterval = 30, persistence: Persistence? = nil,
        maximumAge: TimeInterval = 600, staleLimit: TimeInterval = 86_400, waitLimit: TimeInterval = 2,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        func bounded(_ value: TimeInterval, _ fallback: TimeInterval) -> TimeInterval {
            value.isFinite && value >= 0 ? value : fallback
        }
        self.url = url
        self.transport = transport
        self.cooldown = bounded(cooldown, 30)
        self.persistence = persistence
        self.defaultMaximumAge = max(self.cooldown, bounded(maximumAge, 600))
        self.maximumAge = self.defaultMaximumAge
        self.staleLimit = bounded(staleLimit, 86_400)
        self.waitLimit = min(60, bounded(waitLimit, 2))
        self.now = now
    }

    static func parse(_ document: [UInt8]) throws -> [JWTKey] {
        // A provider's JWKS publishes public keys: symmetric ("oct") keys there are refused.
        try JWKS(json: document).keys.filter { $0.keyType != "oct" }.map { try $0.verificationKey() }
    }

    /// Keys able to verify a token with `kid`: the cached ones, or freshly fetched ones when the set is
    /// past its maximum age or lacks `kid` (and the cooldown allows a fetch).
    ///
    /// - Parameter kid: the token's `kid`; `nil`: the cached keys as they are (fetched on first use and
    ///   once past their maximum age).
    /// - Returns: every verification key of the set (symmetric keys left out), not only `kid`'s; the
    ///   verifier picks the key. May lack `kid` while the cooldown runs, or when a fetch did not answer
    ///   within `waitLimit`.
    /// - Throws: when no usable set is at hand (none yet, or past `staleLimit`) and the fetch failed — now or,
    ///   within the cooldown, last time: `OAuthError` with `transient` (a 5xx answer, an unreachable host),
    ///   `tls`, `discovery` (another non-200 answer), or `invalidResponse` (its `underlying` the `JWTError`)
    ///   for a document that is not a JWKS (not a JSON object, a `keys` member that is not an array);
    ///   unusable keys in it are skipped.
    public func keys(for kid: String?) async throws -> [JWTKey] {
        try await keys(for: kid, afterFailedVerification: false)
    }

    /// Keys to try once more after a token's signature failed with the ones `keys(for:)` gave (an unknown
    /// `kid`, a signature that does not verify, a key of the wrong type): the set fetched again when the
    /// cooldown allows — the provider may have replaced a key's material under the same `kid` — else the
    /// keys at hand.
    ///
    /// - Parameter kid: the token's `kid` (`nil`: none).
    /// - Returns: as `keys(for:)`.
    /// - Throws: as `keys(for:)`.
    public func keysAfterFailedVerification(for kid: String?) async throws -> [JWTKey] {
        try await keys(for: kid, afterFailedVerification: true)
    }

    /// Whether a verification that failed with `error` may pass with a fresher key set (a missing, changed
    /// or replaced key), so that `keysAfterFailedVerification(for:)` is worth asking.
    package static func refetchMayHelp(_ error: JWTError) -> Bool {
        let codes: [JWTError.Code] = [
            JWTError.unknownKey, JWTError.invalidSignature, JWTError.keyAlgorithmMismatch, JWTError.ambiguousKey,
            JWTError.weakKey
        ]
        return codes.contains(error.code)
    }

    private func keys(for kid: String?, afterFailedVerification: Bool) async throws -> [JWTKey] {
        loadKeptSetOnce()
        let before = freshness(at: now())
        let wanted: Bool
        switch before {
        case .none, .stale, .expired: wanted = true
        case .fresh:
            wanted = afterFailedVerification || kid.map { kid in !keys.contains { $0.keyID == kid } } == true
        }
        if wanted, let id = flightToJoin() {
            let usable = before == .fresh || before == .stale
            await wait(for: id, limit: usable ? waitLimit : nil)
        }
        switch freshness(at: now()) {
        case .fresh, .stale: return keys
        case .none, .expired:
            throw lastFailure
                ?? OAuthError(
                    OAuthError.transient,
                    "the keys of \(url.redactedForLogs) are past their stale limit and the next fetch waits for the cooldown"
                )
        }
    }

    private func loadKeptSetOnce() {
        guard !keptSetLoaded else { return }
        keptSetLoaded = true
        guard fetchedAt == nil, let record = persistence?.loadRecord(),
            record.fetchedAt.timeIntervalSince1970.isFinite, record.fetchedAt <= now(),
            let parsed = try? Self.parse(record.document)
        else { return }
        keys = parsed
        document = record.document
        fetchedAt = record.fetchedAt
        maximumAge = effectiveMaximumAge(record.maximumAge)
    }

    private func freshness(at now: Date) -> Freshness {
        guard let fetchedAt else { return .none }
        let age = now.timeIntervalSince(fetchedAt)
        // A clock that went back: fetch again, and use the set meanwhile.
        if age < 0 { return .stale }
        if age < maximumAge { return .fresh }
        return age - maximumAge <= staleLimit ? .stale : .expired
    }

    /// `maximumAge` from a response or a kept record, bounded to `cooldown`…one day; none: the default.
    private func effectiveMaximumAge(_ value: TimeInterval?) -> TimeInterval {
        guard let value, value.isFinite, value >= 0 else { return defaultMaximumAge }
        return max(cooldown, min(value, Self.maximumAgeCap))
    }

    /// The fetch in flight, or a new one when the cooldown allows; `nil`: none may start now.
    private func flightToJoin() -> UInt64? {
        if let flight { return flight.id }
        let now = now()
        if let lastAttempt {
            let elapsed = now.timeIntervalSince(lastAttempt)
            // A negative elapsed time is a clock that went back: that attempt's time says nothing.
            if elapsed >= 0, elapsed < cooldown { return nil }
        }
        nextID &+= 1
        let id = nextID
        flight = Flight(id: id)
        fetchAttempts += 1
        lastAttempt = now
        Task { await self.run(id) }
        return id
    }

    private func run(_ id: UInt64) async {
        let outcome: Result<Fetched, OAuthError>
        do {
            outcome = .success(try await Self.fetch(url, over: transport))
        } catch let error as OAuthError {
            outcome = .failure(error)
        } catch {
            outcome = .failure(
                OAuthError(OAuthError.transient, "\(url.redactedForLogs) could not be fetched", underlying: error))
        }
        let finished = now()
        lastAttempt = finished
        switch outcome {
        case .success(let fetched):
            if fetched.document != document {
                keys = fetched.keys
                document = fetched.document
            }
            fetchedAt = finished
            maximumAge = effectiveMaximumAge(fetched.maximumAge)
            lastFailure = nil
            fetchCount += 1
            persistence?.saveRecord(
                Persistence.Record(document: fetched.document, fetchedAt: finished, maximumAge: maximumAge))
        case .failure(let error):
            lastFailure = error
        }
        guard flight?.id == id, let done = flight else { return }
        flight = nil
        for waiter in done.waiters.values {
            waiter.timer?.cancel()
            waiter.continuation.resume()
        }
    }

    /// Waits until flight `id` has answered, or `limit` seconds (real time) have passed.
    private func wait(for id: UInt64, limit: TimeInterval?) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            guard flight?.id == id else { return continuation.resume() }
            nextID &+= 1
            let waiterID = nextID
            var timer: Task<Void, Never>? = nil
            if let limit {
                timer = Task {
                    guard (try? await Task.sleep(for: .seconds(limit))) != nil else { return }
                    self.timeOut(waiterID, of: id)
                }
            }
            flight?.waiters[waiterID] = Waiter(continuation: continuation, timer: timer)
        }
    }

    private func timeOut(_ waiterID: UInt64, of id: UInt64) {
        guard flight?.id == id, let waiter = flight?.waiters.removeValue(forKey: waiterID) else { return }
        waiter.continuation.resume()
    }

    private static func fetch(_ url: URL, over transport: any HTTPTransport) async throws -> Fetched {
        let response = try await OAuthHTTP.send(
            APIRequest(url: url, headerFields: [.accept: "application/json"], timeout: 15),
            over: transport, logger: nil, what: url.redactedForLogs)
        guard response.status.code == 200 else {
            throw OAuthError(
                response.status.code >= 500 ? OAuthError.transient : OAuthError.discovery,
                "\(url.redactedForLogs) answered HTTP \(response.status.code)", status: response.status.code)
        }
        let document = Array(response.body)
        let keys: [JWTKey]
        do { keys = try parse(document) } catch {
            // Classed (a provider answering something that is no key set), not a bare JWTError.
            throw OAuthError(
                OAuthError.invalidResponse, "\(url.redactedForLogs) answered a document that is not a JWK Set",
                underlying: error)
        }
        return Fetched(
            keys: keys, document: document, maximumAge: maximumAge(cacheControl: response.headerFields[.cacheControl]))
    }

    /// The `max-age` of a `Cache-Control` value (RFC 9111 §5.2.2.1), in seconds; `nil` for none, `no-store`,
    /// `no-cache`, several `max-age`s, or one that is not all digits. Hostile input: the value is read only
    /// up to 1 KiB, and a number of more than 9 digits counts as 999 999 999.
    package static func maximumAge(cacheControl value: String?) -> TimeInterval? {
        guard let value, value.utf8.count <= 1024 else { return nil }
        var found: TimeInterval? = nil
        for part in value.split(separator: ",") {
            let directive = part.trimmingPrefix(while: { $0 == " " || $0 == "\t" })
            let name = directive.prefix { $0 != "=" }.lowercased().filter { $0 != " " && $0 != "\t" }
            if name == "no-store" || name == "no-cache" { return nil }
            guard name == "max-age" else { continue }
            guard found == nil else { return nil }
            var argument = directive.drop { $0 != "=" }.dropFirst().trimmingPrefix(while: { $0 == " " || $0 == "\t" })
            while let last = argument.last, last == " " || last == "\t" { argument = argument.dropLast() }
            if argument.count >= 2, argument.first == "\"", argument.last == "\"" {
                argument = argument.dropFirst().dropLast()
            }
            guard !argument.isEmpty, argument.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            let significant = argument.drop { $0 == "0" }
            found = significant.count > 9 ? 999_999_999 : TimeInterval(Int(significant) ?? 0)
        }
        return found
    }
}
