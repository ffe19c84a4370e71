import Foundation
import MooseJWT
import Testing

/// What a rotation load run shows, token by token, against the bounds of `IssuerRotationLoadTests`: each token's
/// signing key found by its signature among every key the issuer published.
struct RotationReport {
    typealias Bounds = IssuerRotationLoadTests

    /// What the bounds say of one key's tokens.
    struct KeyFigures {
        var tokens = 0
        var firstAppearance: Date? = nil
        var firstAcceptance: Date? = nil
        var lastAcceptance: Date? = nil
    }

    let state: RotationLoad.State
    let start: Date
    let end: Date
    /// The key (`kid#thumbprint`) that signed each of `state.uses`; `nil`: none of the published ones.
    let signers: [String?]
    var figures: [String: KeyFigures] = [:]
    /// Broken bounds, described.
    var findings: [String] = []
    /// The longest time from a token's issue to its first acceptance.
    var worstRecovery: TimeInterval = 0
    /// The latest acceptance of a token signed by a withdrawn key, after its withdrawal (negative: before).
    var worstAfterWithdrawal: TimeInterval = -.infinity
    /// Refusals of tokens signed by a key the resource server had accepted before and that was still published:
    /// each makes the cache fetch again (when the cooldown allows). Not a broken bound; told, with their reasons.
    var refusalsOfKnownKeys: [String] = []

    init(_ state: RotationLoad.State, start: Date, end: Date) {
        self.state = state
        self.start = start
        self.end = end
        signers = state.uses.map { Self.signer(of: $0.token, among: state.keys) }
        for (use, signer) in zip(state.uses, signers) {
            guard let signer else { continue }
            var key = figures[signer] ?? KeyFigures()
            key.tokens += 1
            key.firstAppearance = min(key.firstAppearance ?? use.obtainedAt, use.obtainedAt)
            if let first = use.firstAcceptedAt { key.firstAcceptance = min(key.firstAcceptance ?? first, first) }
            if let last = use.lastAcceptedAt { key.lastAcceptance = max(key.lastAcceptance ?? last, last) }
            figures[signer] = key
        }
        for (use, signer) in zip(state.uses, signers) {
            guard let signer, let key = state.keys[signer] else {
                findings.append("a token signed by none of the published keys, had at \(at(use.obtainedAt))")
                continue
            }
            judge(use, signedBy: key, named: signer)
        }
        judgeKeptTokens()
    }

    /// The published key whose signature `token` carries.
    static func signer(of token: String, among keys: [String: PublishedKey]) -> String? {
        guard let jws = try? JWS(compact: token) else { return nil }
        for (id, published) in keys where published.kid == jws.header.keyID {
            let verifier = JWTVerifier(keys: [published.key], allowedAlgorithms: [.rs256, .es256, .eddsa])
            if (try? verifier.verifySignature(of: jws)) != nil { return id }
        }
        return nil
    }

    /// "+12.34 s" into the run.
    func at(_ time: Date) -> String { "+" + rotationSeconds(time.timeIntervalSince(start)) }

    /// One token against the bounds: not accepted past its key's withdrawal plus the maximum age; accepted within
    /// the cooldown of its key's first appearance (when that falls before the withdrawal and the end); never
    /// refused, once accepted, while its key was published.
    mutating func judge(_ use: TokenUse, signedBy key: PublishedKey, named name: String) {
        let what = "\(use.replayed ? "kept" : "a client's") token of \(name.prefix(24)), had at \(at(use.obtainedAt))"
        if let withdrawn = key.withdrawnAt, let last = use.lastAcceptedAt {
            worstAfterWithdrawal = max(worstAfterWithdrawal, last.timeIntervalSince(withdrawn))
            if last > withdrawn.addingTimeInterval(Bounds.maximumAge + Bounds.slack) {
                findings.append("\(what): accepted at \(at(last)), its key withdrawn at \(at(withdrawn))")
            }
        }
        if let first = use.firstAcceptedAt {
            worstRecovery = max(worstRecovery, first.timeIntervalSince(use.obtainedAt))
        }
        let appeared = figures[name]?.firstAppearance ?? use.obtainedAt
        let deadline = max(use.obtainedAt, appeared).addingTimeInterval(Bounds.cooldown + Bounds.slack)
        if deadline < min(end, key.withdrawalBegan ?? end) {
            if let first = use.firstAcceptedAt {
                if first > deadline {
                    findings.append("\(what): first accepted at \(at(first)), after \(at(deadline))")
                }
            } else {
                findings.append("\(what): never accepted (\(use.verifications) tries)")
            }
        }
        if let (refused, reason) = use.firstRefusal, let known = figures[name]?.firstAcceptance, known < refused,
            refused < (key.withdrawalBegan ?? .distantFuture)
        {
            refusalsOfKnownKeys.append("\(what): refused at \(at(refused)): \(reason)")
        }
        if let refused = use.refusedAfterAcceptanceAt, refused < (key.withdrawalBegan ?? .distantFuture) {
            findings.append("\(what): refused at \(at(refused)) after it was accepted, its key still published")
        }
    }

    /// The kept tokens: each withdrawn key's was accepted before its withdrawal and refused at the end (the bound
    /// above is not empty); a published key's is accepted at the end.
    mutating func judgeKeptTokens() {
        var withdrawnChecked = Set<String>()
        for (use, signer) in zip(state.uses, signers) where use.replayed {
            guard let signer, let key = state.keys[signer] else { continue }
            if let withdrawn = key.withdrawnAt {
                withdrawnChecked.insert(signer)
                if use.firstAcceptedAt.map({ $0 < withdrawn }) != true || use.lastAccepted {
                    findings.append("kept token of withdrawn \(signer.prefix(24)): not accepted before, or at the end")
                }
            } else if !use.lastAccepted {
                findings.append("kept token of \(signer.prefix(24)), still published: refused at the end")
            }
        }
        for (id, key) in state.keys where key.withdrawnAt != nil && !withdrawnChecked.contains(id) {
            findings.append("no kept token of withdrawn \(id.prefix(24)): its withdrawal went untested")
        }
    }

    /// Records every finding as an issue.
    func check() {
        for finding in findings { Issue.record(Comment(rawValue: finding)) }
        #expect(state.counters.unavailable == 0, "503s: the cache had no usable keys")
        #expect(state.counters.longestVerification < Bounds.waitLimit + Bounds.slack, "a verification hung")
        #expect(state.counters.verifications >= Bounds.clients * Int(Bounds.duration), "not much of a load")
    }

    /// The run's figures, for the issue's closing note.
    func print(attempts: Int, answered: Int, elapsed: TimeInterval, fetches: [Date]) {
        let counters = state.counters
        var lines = [
            "rotation load: \(Bounds.clients) clients for \(rotationSeconds(elapsed));"
                + " maximum age \(Bounds.maximumAge) s, cooldown \(Bounds.cooldown) s,"
                + " wait limit \(Bounds.waitLimit) s",
            "  tokens: \(counters.tokenRequests) requested, \(counters.tokenFailures) not given;"
                + " \(state.uses.count) used (\(state.uses.filter(\.replayed).count) kept and replayed)",
            "  tokens not given: "
                + counters.tokenFailureReasons.sorted { $0.value > $1.value }.map { "\($0.value)× \($0.key)" }
                .joined(separator: "; "),
            "  verifications: \(counters.verifications): \(counters.accepted) accepted, \(counters.refused) refused"
                + " (\(counters.unavailable) with 503); longest \(rotationSeconds(counters.longestVerification))",
            "  JWKS fetch attempts: \(attempts) (\(answered) answered), at most \(Int(elapsed / Bounds.cooldown) + 1):"
                + " at \(fetches.map { String(format: "%.1f", $0.timeIntervalSince(start)) }.joined(separator: ", "))"
                + " s",
            "  worst recovery (token had → first accepted): \(rotationSeconds(worstRecovery));"
                + " latest acceptance after a withdrawal: \(rotationSeconds(worstAfterWithdrawal))"
                + " (bound \(rotationSeconds(Bounds.maximumAge + Bounds.slack)))"
        ]
        for (id, key) in state.keys.sorted(by: {
            ($0.value.initial ? 0 : 1, $0.key) < ($1.value.initial ? 0 : 1, $1.key)
        }) {
            let figures = figures[id] ?? KeyFigures()
            var line = "  key \(id.prefix(24))\(key.initial ? " (initial)" : ""): \(figures.tokens) tokens"
            if let appeared = figures.firstAppearance, let accepted = figures.firstAcceptance {
                line += ", first seen \(at(appeared)), first accepted \(at(accepted))"
                line += " (after \(rotationSeconds(accepted.timeIntervalSince(appeared))))"
            }
            if let withdrawn = key.withdrawnAt {
                line += "; withdrawn at \(at(withdrawn))"
                if let last = figures.lastAcceptance { line += ", last accepted \(at(last))" }
            }
            lines.append(line)
        }
        lines.append(
            "  refusals of tokens whose key the server had accepted and was published: \(refusalsOfKnownKeys.count)")
        lines += refusalsOfKnownKeys.prefix(10).map { "    " + $0 }
        Swift.print(lines.joined(separator: "\n"))
    }
}
