import Foundation
import MooseCrypto
import MooseSealing
import MooseTestSupport
import Testing

/// A store envelope sealed outside Swift (Fixtures/sealing/envelope-v1.json: Python cryptography on
/// OpenSSL, tools/fixtures/make_envelope_fixture.py) opens on the backend this build has: libcrypto in
/// tools/test's main build, swift-crypto alone in tools/test-swift-crypto. So a store written by one
/// backend is read by the other, in two separate binaries.
struct EnvelopeFixtureTests {
    struct Fixture: Decodable {
        struct ScryptCase: Decodable {
            let password: String; let salt: String; let n: UInt64; let r: UInt64; let p: UInt64; let key: String
        }
        let masterKey: String
        let storeID: String
        let keyID: Int64
        let namespace: String
        let name: String
        let value: String
        let wrappedDataKey: String
        let sealedValue: String
        let keyCheck: String
        let scrypt: ScryptCase
    }

    static func bytes(_ hex: String) throws -> [UInt8] { try #require(Hex.decode(hex)) }

    @Test func envelopeSealedByLibCryptoOpens() throws {
        let fixture = try JSONDecoder().decode(Fixture.self, from: Fixtures.data("sealing/envelope-v1.json"))
        let master = SecretKey(try Self.bytes(fixture.masterKey))
        let storeID = try Self.bytes(fixture.storeID)
        #expect(try Envelope.isKeyCheck(Self.bytes(fixture.keyCheck), of: master, storeID: storeID))
        let dataKey = try Envelope.unwrap(
            Self.bytes(fixture.wrappedDataKey), id: fixture.keyID, master: master, storeID: storeID)
        let aad = Envelope.valueAAD(
            storeID: storeID, namespace: fixture.namespace, name: fixture.name, keyID: fixture.keyID)
        let opened = try AESGCM.Context(key: dataKey).openCombined(Self.bytes(fixture.sealedValue), authenticating: aad)
        #expect(opened == (try Self.bytes(fixture.value)))
        // Bound to its place: another name, key id or store does not open it.
        let elsewhere = Envelope.valueAAD(
            storeID: storeID, namespace: fixture.namespace, name: "other", keyID: fixture.keyID)
        expectCode(CryptographyError.authenticationFailure) {
            try AESGCM.Context(key: dataKey).openCombined(Self.bytes(fixture.sealedValue), authenticating: elsewhere)
        }
        #expect(throws: SealingError.self) {
            try Envelope.unwrap(
                Self.bytes(fixture.wrappedDataKey), id: fixture.keyID + 1, master: master, storeID: storeID)
        }
    }

    /// The passphrase key source's KDF gives the key OpenSSL's scrypt gave.
    @Test func scryptMatchesOpenSSL() throws {
        let fixture = try JSONDecoder().decode(Fixture.self, from: Fixtures.data("sealing/envelope-v1.json")).scrypt
        let key = try Scrypt.deriveKey(
            password: Array(fixture.password.utf8), salt: Self.bytes(fixture.salt),
            parameters: .init(n: fixture.n, r: fixture.r, p: fixture.p))
        #expect(key.withUnsafeBytes { Hex.encode($0) } == fixture.key)
    }
}
