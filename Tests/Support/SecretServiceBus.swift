import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real freedesktop Secret Service for tests: gnome-keyring-daemon on a private D-Bus session bus
/// (tools/secretsvc), its login collection unlocked.
///
/// `address` is `$MOOSE_SECRET_SERVICE_BUS` when tools/test started it, else tools/secretsvc/start
/// runs (idempotent); `nil` when it cannot run here (tests then record why).
public enum SecretServiceBus {
    /// The bus address (`unix:path=…`), for `DBUS_SESSION_BUS_ADDRESS`.
    public static let address: String? = {
        if let address = ProcessInfo.processInfo.environment["MOOSE_SECRET_SERVICE_BUS"], !address.isEmpty {
            return address
        }
        let (status, output) = runCapturingStdout(
            Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/secretsvc/start"))
        guard status == 0, let address = output.split(separator: "\n").last.map(String.init), address.hasPrefix("unix:")
        else { return nil }
        return address
    }()

    /// Points this process's libsecret at the test bus (libsecret reads `DBUS_SESSION_BUS_ADDRESS`
    /// when it first connects); returns the address, `nil` when there is none.
    public static func useInThisProcess() -> String? {
        guard let address else { return nil }
        setenv("DBUS_SESSION_BUS_ADDRESS", address, 1)
        return address
    }

    /// Why the Secret Service tests cannot run, for a failure message.
    public static let unavailable =
        "the Secret Service (tools/secretsvc/start: gnome-keyring-daemon in a private D-Bus session) could not start here"

    /// `secret-tool ARGS` on the test bus: its status and standard output.
    public static func secretTool(_ arguments: [String], input: String? = nil) -> (Int32, String) {
        guard let address else { return (-1, "") }
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/secret-tool")
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        process.environment = environment
        let output = Pipe(), stdin = Pipe()
        process.standardOutput = output
        process.standardInput = stdin
        do { try process.run() } catch { return (-1, "\(error)") }
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try? stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
