#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Everything a person (or `moose inspect`) wants to know about a token: what it says, whether its
/// signature checks out, and every claim check that fails.
///
/// Unlike `JWTVerifier.verify`, which stops at the first failure and decodes claims only after the
/// signature, an inspection decodes first and collects every problem — it is a diagnostic tool.
///
/// ```swift
/// let report = try TokenInspection(token, verifier: verifier, validation: ClaimValidation(audiences: ["api"]))
/// switch report.verdict { case .valid: … case .decoded: … case .invalid: print(report.problems) }
/// ```
public struct TokenInspection: Sendable {
    /// The outcome.
    public enum Verdict: String, Sendable {
        /// Signature verified and every check passed.
        case valid
        /// Decoded and every claim check passed, but no key was given, so the signature is unchecked.
        case decoded
        /// Something failed: see `problems`.
        case invalid
    }

    /// What happened to the signature.
    public enum SignatureStatus: Sendable {
        /// No key was given.
        case notChecked
        /// Verified, with this key and algorithm.
        case verified(keyID: String?, algorithm: JWTAlgorithm)
        /// Verification failed (the error is also in `problems`).
        case failed
    }

    /// The parsed token.
    public let jws: JWS
    /// The claims, when the payload is a JSON object.
    public let claims: JWTClaims?
    /// The payload as text, when it is not JSON (a plain JWS).
    public let payloadText: String?
    /// The signature outcome.
    public let signature: SignatureStatus
    /// Every failed check, signature first.
    public let problems: [JWTError]

    /// The overall verdict.
    public var verdict: Verdict {
        if !problems.isEmpty { return .invalid }
        if case .verified = signature { return .valid }
        return .decoded
    }

    /// Inspects `token`. Throws only when the token is unusable (malformed, too large, encrypted,
    /// invalid JSON); everything else becomes a `problem`.
    public init(
        _ token: String, verifier: JWTVerifier?, validation: ClaimValidation,
        maximumSize: Int = JWS.defaultMaximumSize
    ) throws(JWTError) {
        jws = try JWS(compact: token, maximumSize: maximumSize)
        var problems: [JWTError] = []

        // Payload: a claims object — anything else (other JSON, text, nothing) is shown but is no
        // claims set, and the verdict says so (RFC 7519 §7.2 step 10), as JWTVerifier does.
        let parsed: JSONValue?
        do throws(JWTError) {
            parsed = try jws.payload.withUnsafeBufferPointer { buffer throws(JWTError) in
                try JSONValue(parsing: buffer, maximumDepth: JSONValue.defaultMaximumDepth, context: "payload")
            }
        } catch {
            // Meant as JSON but broken (duplicate members, too deep…): the token is unusable.
            let first = jws.payload.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
            if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { throw error }
            parsed = nil
        }
        if case .object(let object)? = parsed {
            do throws(JWTError) {
                claims = try JWTClaims(object)
            } catch {
                problems.append(error)
                claims = nil
            }
            payloadText = nil
        } else {
            claims = nil
            guard let text = String(validating: jws.payload, as: UTF8.self) else {
                throw JWTError(
                    JWTError.invalidJSON, "payload is neither JSON nor UTF-8 text (\(jws.payload.count) bytes)")
            }
            payloadText = text
            let what = parsed.map { "a JSON \($0.typeName)" } ?? (text.isEmpty ? "empty" : "not JSON")
            problems.append(
                JWTError(
                    JWTError.claimsNotObject,
                    "payload is \(what), not a JSON object: it is no JWT claims set (RFC 7519 §7.2)"))
        }

        if jws.header.algorithm.lowercased() == "none" {
            problems.insert(
                JWTError(JWTError.algorithmNone, "alg \"none\": an unsigned token is never valid", field: "alg"), at: 0)
            signature = .failed
        } else if let verifier {
            do throws(JWTError) {
                let key = try verifier.verifySignature(of: jws)
                signature = .verified(keyID: key.keyID, algorithm: jws.header.knownAlgorithm ?? .hs256)
            } catch {
                problems.insert(error, at: 0)
                signature = .failed
            }
        } else {
            signature = .notChecked
        }

        if let claims { problems += validation.failures(claims) }
        self.problems = problems
    }
}
