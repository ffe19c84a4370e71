import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The repository's test identity provider (tools/idp: django-oauth-toolkit on 127.0.0.1).
///
/// `issuer` is `$MOOSE_IDP_ISSUER` when tools/test started the provider, otherwise this starts it
/// (tools/idp/start is idempotent) and returns the issuer it printed.
public enum TestIdentityProvider {
    /// The issuer, e.g. `http://127.0.0.1:8765`.
    public static let issuer: String = {
        if let issuer = ProcessInfo.processInfo.environment["MOOSE_IDP_ISSUER"], !issuer.isEmpty { return issuer }
        let script = Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/idp/start")
        // posix_spawn + waitpid rather than Foundation's Process: its waitUntilExit never returned
        // here when called from a Swift Testing task (the child stayed a zombie, unreaped).
        let (status, output) = runCapturingStdout(script)
        guard status == 0, let issuer = output.split(separator: "\n").last.map(String.init), issuer.hasPrefix("http") else {
            fatalError("tools/idp/start failed (status \(status)): \(output)")
        }
        return issuer
    }()

    /// The scripted browser for `$BROWSER` (tools/idp/headless_browser.py), as a command line.
    public static var browserCommand: String {
        "python3 " + Fixtures.root.replacingOccurrences(of: "/Fixtures", with: "/tools/idp/headless_browser.py")
    }
}

/// Runs `path` (no arguments), returning its exit status and standard output (stderr is inherited).
public func runCapturingStdout(_ path: String) -> (Int32, String) { runCapturingStdout([path]) }

/// Runs `argv[0]` with the rest as arguments (no shell), returning its exit status and standard
/// output (stderr is inherited).
public func runCapturingStdout(_ argv: [String]) -> (Int32, String) {
    let path = argv[0]
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { return (-1, "pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_addclose(&actions, fds[0])
    posix_spawn_file_actions_addclose(&actions, fds[1])
    closeInheritedDescriptors(&actions)
    var pid: pid_t = 0
    let spawned = path.withCString { cPath -> Int32 in
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        return posix_spawnp(&pid, cPath, &actions, nil, &cArguments, environ)
    }
    close(fds[1])
    guard spawned == 0 else { close(fds[0]); return (-1, "cannot run \(path): error \(spawned)") }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fds[0], &buffer, buffer.count)
        if n > 0 { output.append(contentsOf: buffer[0..<n]) } else if n == 0 || errno != EINTR { break }
    }
    close(fds[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    return (exitStatus, String(decoding: output, as: UTF8.self))
}

