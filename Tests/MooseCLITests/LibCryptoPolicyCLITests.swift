import Foundation
import MooseTestSupport
import Testing

/// `moose` reads its store through libcrypto's default provider called directly (no EVP fetch) only
/// where EVP would have called the same code. These runs give the real `moose token` different
/// `openssl.cnf` files through `OPENSSL_CONF` and check that the system's policy still decides.
struct LibCryptoPolicyCLITests {
    static let legacyAndDefault = """
        openssl_conf = openssl_init
        [openssl_init]
        providers = provider_sect
        [provider_sect]
        default = default_sect
        legacy = legacy_sect
        [default_sect]
        activate = 1
        [legacy_sect]
        activate = 1
        """

    /// `null` stands for any provider Moose does not know (a PKCS#11 or TPM provider, say).
    static let anotherProvider = """
        openssl_conf = openssl_init
        [openssl_init]
        providers = provider_sect
        [provider_sect]
        default = default_sect
        null = null_sect
        [default_sect]
        activate = 1
        [null_sect]
        activate = 1
        """

    static let fipsOnly = """
        openssl_conf = openssl_init
        [openssl_init]
        alg_section = evp_properties
        [evp_properties]
        default_properties = fips=yes
        """

    @Test func theSystemsOpenSSLPolicyStillDecides() async throws {
        let (home, environment) = try await CLI.logIn("moose-cli-openssl-policy")
        defer { try? FileManager.default.removeItem(at: home) }
        func token(_ config: String?) async throws -> CLIResult {
            var env = environment
            if let config {
                let file = home.appendingPathComponent("openssl-\(UUID().uuidString).cnf")
                try Data(config.utf8).write(to: file)
                env["OPENSSL_CONF"] = file.path
            }
            return try await CLI.run(["token"], environment: env)
        }
        let plain = try await token(nil)
        #expect(plain.status == 0 && !plain.stdout.isEmpty, "\(plain.stderr)")

        // The legacy provider beside the default one: the direct path still applies; the same token.
        let legacy = try await token(Self.legacyAndDefault)
        #expect(legacy.status == 0 && legacy.stdout == plain.stdout, "\(legacy.stderr)")

        // A provider Moose does not know is active: EVP decides (and finds the default provider's).
        let other = try await token(Self.anotherProvider)
        #expect(other.status == 0 && other.stdout == plain.stdout, "\(other.stderr)")

        // FIPS asked for, and no FIPS provider on this machine: EVP refuses every algorithm, so the
        // store cannot be read — the direct path must not read it anyway.
        let fips = try await token(Self.fipsOnly)
        #expect(fips.status != 0 && fips.stdout.isEmpty, "a FIPS-only configuration was bypassed: \(fips.stdout)")
        #expect(!fips.stderr.isEmpty)

        // Nothing was lost: the ordinary configuration reads the same token again.
        let after = try await token(nil)
        #expect(after.status == 0 && after.stdout == plain.stdout, "\(after.stderr)")
    }
}
