import Foundation
import MooseCrypto
import MooseJWT
import MooseTestSupport
import Testing

/// Issue "Untrusted input": every verdict agrees with `JWTVerifier` on what is a claims set.
struct UntrustedInputTests {
    let key = JWTKey(secret: Array(repeating: UInt8(9), count: 32))

    @Test(arguments: [
        "null", "42", "\"a string\"", "true", "plain text", "", "/* comment */{\"sub\":\"alice\"}", "[1,2]"
    ])
    func aSignedTokenWhosePayloadIsNotAnObjectIsNeverValid(payload: String) throws {
        let token = try JWTSigner(key: key, algorithm: .hs256).sign(payload: Array(payload.utf8))
        let verifier = JWTVerifier(
            keys: [key], allowedAlgorithms: [.hs256], validation: ClaimValidation(acceptsAnyAudience: true))
        // RFC 7519 §7.2 step 10: the verifier refuses it…
        #expect(throws: JWTError.self) { _ = try verifier.verify(token) }
        // …and the diagnostic verdict agrees (it said "valid" before).
        if let report = try? TokenInspection(token, verifier: verifier, validation: verifier.validation) {
            #expect(report.verdict == .invalid, "payload \(payload)")
            if case .verified = report.signature {
            } else {
                Issue.record("the signature itself is good: \(report.signature)")
            }
            #expect(report.problems.contains { $0.code == JWTError.claimsNotObject || $0.code == JWTError.invalidJSON })
        }
    }

    @Test func aValidObjectPayloadIsStillValid() throws {
        let token = try JWTSigner(key: key, algorithm: .hs256).sign(["sub": "alice"])
        let verifier = JWTVerifier(keys: [key], allowedAlgorithms: [.hs256])
        let report = try TokenInspection(token, verifier: verifier, validation: verifier.validation)
        #expect(report.verdict == .valid)
    }

    @Test func jsonOutputEscapesEveryControlAndBidiCharacter() {
        let text = JSONValue.string("a\u{1B}]0;x\u{07}b\u{9B}c\u{202E}d\u{2066}e").serialized()
        #expect(text == #""a\u001b]0;x\u0007b\u009bc\u202ed\u2066e""#)
    }
}
