import Foundation
import MooseTestSupport
import Testing

/// Issue "The first hour", §4: a device login that nobody approves ends at `--timeout`, and a
/// provider whose discovery lists no device endpoint gets a message naming `--device-endpoint`.
@Suite(.serialized)
struct DeviceLoginCLITests {
    @Test func timeoutAppliesToTheDeviceGrant() async throws {
        let (home, environment) = CLI.home("moose-device-timeout")
        defer { try? FileManager.default.removeItem(at: home) }
        let started = Date()
        let login = try await CLI.run(["login", "--device", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-device",
                                       "--device-endpoint", TestIdentityProvider.issuer + "/device-authorization/", "--timeout", "3"],
                                      environment: environment, timeout: 30)
        #expect(login.status == 1, "\(login.status) \(login.stdout) \(login.stderr)")
        #expect(login.stderr.contains("no approval within 3s"), "\(login.stderr)")
        #expect(Date().timeIntervalSince(started) < 20, "--timeout 3 was not applied to --device")
    }

    @Test func withoutADeviceEndpointTheMessageNamesTheOption() async throws {
        let (home, environment) = CLI.home("moose-device-endpoint")
        defer { try? FileManager.default.removeItem(at: home) }
        let login = try await CLI.run(["login", "--device", "--issuer", TestIdentityProvider.issuer, "--client-id", "moose-device"],
                                      environment: environment, timeout: 30)
        #expect(login.status == 1, "\(login.status) \(login.stderr)")
        #expect(login.stderr.contains("--device-endpoint"), "\(login.stderr)")
    }
}
