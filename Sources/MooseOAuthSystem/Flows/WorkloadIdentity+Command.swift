#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import MooseOAuth
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A workload identity token printed by a command (`gcloud auth print-identity-token`, a vault CLI…).
extension WorkloadIdentity {
    /// A command's standard output as the token (`["gcloud", "auth", "print-identity-token"]`), run
    /// without a shell on every renewal (the first word looked up on `PATH`); a non-zero exit or no
    /// output is a `workloadIdentity` error. The command inherits no descriptor but standard error.
    /// No words (or an empty first one) is a source that fails each read with `invalidConfiguration`.
    ///
    /// Also what runs a plan's `command:PROGRAM ARG…` source: MooseOAuth starts no process, so pass this
    /// function as `commands:` to `TokenManager(plan:…)`, `TokenManager.open(…)` or
    /// `SessionPlan.identity(_:transport:commands:)`.
    @Sendable public static func command(_ words: [String]) -> WorkloadIdentity {
        guard let program = words.first, !program.isEmpty else {
            return WorkloadIdentity(name: "a command") { _ in
                throw OAuthError(
                    OAuthError.invalidConfiguration, "a command workload source needs a program to run; none was given")
            }
        }
        let name = "the command \(program)"
        return WorkloadIdentity(name: name) { _ in
            let (status, output) = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<(Int32, [UInt8]), any Error>) in
                DispatchQueue.global().async { continuation.resume(with: Result { try run(words) }) }
            }
            guard status == 0, !output.isEmpty else {
                throw OAuthError(
                    OAuthError.workloadIdentity,
                    "\(name) exited with status \(status)\(output.isEmpty ? " and printed nothing" : "")")
            }
            return String(decoding: output, as: UTF8.self)
        }
    }

    /// Runs `words` (a PATH lookup for the first), standard output captured (at most 64 KiB), standard
    /// error passed through, nothing else of moose's inherited.
    private static func run(_ words: [String]) throws -> (Int32, [UInt8]) {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            throw OAuthError(OAuthError.workloadIdentity, "cannot run \(words[0]): no pipe")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
        posix_spawn_file_actions_addclose(&actions, pipeEnds[1])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        guard ChildProcess.closeInheritedDescriptors(&actions, &attributes), ChildProcess.defaultSignals(&attributes)
        else {
            close(pipeEnds[0])
            close(pipeEnds[1])
            throw OAuthError(
                OAuthError.workloadIdentity,
                "not running \(words[0]): this C library cannot close this process's descriptors in it")
        }
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawnp(&pid, words[0], &actions, &attributes, argv, environ)
        close(pipeEnds[1])
        guard spawned == 0 else {
            close(pipeEnds[0])
            throw OAuthError(
                OAuthError.workloadIdentity, "cannot run \(words[0]) (error \(spawned)): is it installed, on PATH?")
        }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(pipeEnds[0], &buffer, buffer.count)
            if count > 0 {
                if output.count < 65_536 { output += buffer[0..<count] }
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        close(pipeEnds[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let exited = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exited, output.count > 65_536 ? [] : output)
    }
}
