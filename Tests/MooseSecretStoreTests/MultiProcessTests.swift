import Foundation
import MooseCrypto
@testable import MooseSecretStore
import MooseHTTP
import MooseOAuth
import MooseSQLiteStorage
import MooseTestSupport
import Synchronization
import Testing

/// A `moose-store-worker` child process whose stdout lines we read as they come.
final class Worker: Sendable {
    static let binary = builtExecutable("moose-store-worker")

    let process = TestProcess()
    private let pipe = Pipe()
    // ThreadLocked (a pthread mutex), not Mutex: the reader runs on a plain thread, and
    // ThreadSanitizer on Linux cannot see Mutex's futex (it reported these locked accesses as a race).
    private let lines = ThreadLocked<(buffer: String, lines: [String])>(("", []))

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: Worker.binary)
        process.arguments = arguments
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lines.withLock { state in
                state.buffer += String(decoding: data, as: UTF8.self)
                while let newline = state.buffer.firstIndex(of: "\n") {
                    state.lines.append(String(state.buffer[..<newline]))
                    state.buffer = String(state.buffer[state.buffer.index(after: newline)...])
                }
            }
        }
        try process.run()
    }

    var output: [String] { lines.withLock { $0.lines } }

    /// Waits until a line satisfies `predicate` (or the timeout passes).
    func waitForLine(timeout: TimeInterval = 30, _ predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = output.first(where: predicate) { return line }
            usleep(2_000)
        }
        return nil
    }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits for exit (SIGKILL after `timeout`), then drains what the pipe still holds.
    func finish(timeout: TimeInterval = 120) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(5_000) }
        if process.isRunning { kill9() }
        process.waitUntilExit()
        usleep(50_000)
        pipe.fileHandleForReading.readabilityHandler = nil
        let rest = pipe.fileHandleForReading.readDataToEndOfFile()
        lines.withLock { state in
            state.buffer += String(decoding: rest, as: UTF8.self)
            for line in state.buffer.split(separator: "\n") { state.lines.append(String(line)) }
            state.buffer = ""
        }
        return process.terminationStatus
    }
}

struct MultiProcessTests {
    @Test func fourProcessesInterleavedWritesAllLand() throws {
        let folder = try TempFolder()
        let path = folder.file("shared.sqlite"), keyPath = folder.file("shared.key")
        _ = try SecretStore(path: path, masterKey: .keyFile(keyPath)) // create first: workers open it
        let workers = try (0..<4).map { try Worker(["write", path, keyPath, "\($0)", "500"]) }
        for worker in workers { #expect(worker.finish() == 0, "worker failed: \(worker.output.last ?? "")") }
        let store = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        for worker in 0..<4 {
            let entries = try store.list(namespace: "worker-\(worker)")
            #expect(entries.count == 500)
            for index in stride(from: 0, to: 500, by: 7) {
                let value = try #require(try store.get(namespace: "worker-\(worker)", name: "item-\(index)"))
                #expect(value.starts(with: Array("value \(worker) \(index) ".utf8)))
            }
        }
        let report = try store.check()
        #expect(report.integrity == "ok")
        #expect(report.good == 2000 && report.bad.isEmpty)
    }

    @Test func killNineNeverLosesACommittedWrite() throws {
        let folder = try TempFolder()
        let path = folder.file("crash.sqlite"), keyPath = folder.file("crash.key")
        _ = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        var generator = SystemRandomNumberGenerator()
        var committed: [Int: Int] = [:]
        for round in 0..<20 {
            let worker = try Worker(["loop", path, keyPath, "r\(round)"])
            #expect(worker.waitForLine { $0.hasPrefix("ok ") } != nil, "round \(round): no write")
            usleep(UInt32.random(in: 1_000...150_000, using: &generator))
            worker.kill9()
            _ = worker.finish()
            let reported = worker.output.compactMap { line -> Int? in
                line.hasPrefix("ok ") ? Int(line.dropFirst(3)) : nil
            }
            committed[round] = reported.max() ?? -1
        }
        let store = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        var total = 0
        for (round, last) in committed {
            for index in 0...max(last, 0) where last >= 0 {
                let value = try store.get(namespace: "worker-r\(round)", name: "item-\(index)")
                #expect(
                    value?.starts(with: Array("value r\(round) \(index) ".utf8)) == true,
                    "round \(round): committed write \(index) lost")
                total += 1
            }
        }
        #expect(total >= 20)
        #expect(try store.check().isHealthy)
    }

    @Test func leaseIsHeldByOneProcessAtATime() throws {
        let folder = try TempFolder()
        let path = folder.file("lease.sqlite"), keyPath = folder.file("lease.key")
        _ = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        let workers = try (0..<3).map { _ in try Worker(["lease", path, keyPath, "refresh", "10", "0.3"]) }
        var intervals: [(token: Int64, start: Int64, end: Int64)] = []
        for worker in workers {
            #expect(worker.finish() == 0)
            let line = try #require(worker.output.first { $0.hasPrefix("released ") })
            let parts = line.split(separator: " ")
            #expect(parts[4] == "true", "the holder lost its lease while holding it")
            intervals.append((Int64(parts[1]) ?? 0, Int64(parts[2]) ?? 0, Int64(parts[3]) ?? 0))
        }
        intervals.sort { $0.start < $1.start }
        #expect(Set(intervals.map(\.token)).count == 3, "fencing tokens must differ")
        for (a, b) in zip(intervals, intervals.dropFirst()) {
            #expect(a.end <= b.start, "two holders overlapped: \(a) and \(b)")
            #expect(b.token > a.token)
        }
    }

    /// A holder killed with SIGKILL while it holds the lease (30 s ttl) blocks nobody: the kernel drops
    /// its file lock with the process, and the next process takes the lease over at once, with the
    /// next fencing token (issue "A refresh survives its caller", §1). Before the file lock, the next
    /// process waited out the whole ttl.
    @Test func leaseOfAKilledHolderIsTakenOverAtOnce() throws {
        let folder = try TempFolder()
        let path = folder.file("lease.sqlite"), keyPath = folder.file("lease.key")
        _ = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        let holder = try Worker(["lease", path, keyPath, "refresh", "30", "-1"]) // holds forever
        let acquired = try #require(holder.waitForLine { $0.hasPrefix("acquired ") })
        let firstToken = Int64(acquired.split(separator: " ")[1]) ?? 0
        // While the holder lives, its 30 s lease excludes others.
        let blocked = try Worker(["lease", path, keyPath, "refresh", "5", "0"])
        usleep(300_000)
        #expect(!blocked.output.contains { $0.hasPrefix("acquired ") }, "a live holder's lease was taken")
        let killed = Date()
        holder.kill9()
        #expect(blocked.finish() == 0)
        let line = try #require(blocked.output.first { $0.hasPrefix("acquired ") })
        let token = Int64(line.split(separator: " ")[1]) ?? 0
        let start = Int64(line.split(separator: " ")[2]) ?? 0
        #expect(token == firstToken + 1)
        let waited = Double(start) / 1000 - killed.timeIntervalSince1970
        #expect(waited < 5, "the next holder waited \(waited) s after the kill (the lease's ttl is 30 s)")
    }

    /// Without the file lock (a holder from an older Moose: its row only), a killed holder's lease
    /// still lapses after its ttl, as before: the row of a holder that had no file lock is never taken over.
    @Test func aRowLeaseWithoutTheFileLockLapsesAfterItsTTL() throws {
        let folder = try TempFolder()
        let path = folder.file("lease.sqlite"), keyPath = folder.file("lease.key")
        let store = try SecretStore(path: path, masterKey: .keyFile(keyPath))
        let old: SessionLease = try #require(
            try store.locked { (state) throws(SecretStoreError) in
                try Leases.tryAcquire(state, name: "refresh", ttl: 1.5, fileLocked: false)
            })
        let started = Date()
        let next = try Worker(["lease", path, keyPath, "refresh", "5", "0"])
        #expect(next.finish() == 0)
        let line = try #require(next.output.first { $0.hasPrefix("acquired ") })
        #expect(Int64(line.split(separator: " ")[1]) == old.fencingToken + 1)
        #expect((Double(line.split(separator: " ")[2]) ?? 0) / 1000 - started.timeIntervalSince1970 >= 1.2)
    }
}

struct InProcessConcurrencyTests {
    @Test func manyTasksShareOneStore() async throws {
        let folder = try TempFolder()
        let store = try SecretStore(path: folder.file("s.sqlite"), masterKey: .raw(try SecureRandom.bytes(count: 32)))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<16 {
                group.addTask {
                    for index in 0..<25 {
                        try store.put(Array("\(task)-\(index)".utf8), namespace: "t\(task)", name: "\(index)")
                        #expect(
                            try store.get(namespace: "t\(task)", name: "\(index)") == Array("\(task)-\(index)".utf8))
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try store.list().count == 400)
    }

    @Test func leaseInOneProcessExcludesOthersAndFencesWrites() async throws {
        let folder = try TempFolder()
        let store = try SecretStore(path: folder.file("s.sqlite"), masterKey: .raw(try SecureRandom.bytes(count: 32)))
        let lease = try #require(try store.tryAcquireLease(name: "refresh", ttl: 0.3, as: SessionLease.self))
        #expect(try store.tryAcquireLease(name: "refresh", ttl: 5, as: SessionLease.self) == nil)
        try store.transaction { tx throws(SecretStoreError) in
            try tx.requireLease(lease)
            try tx.put(Array("fenced".utf8), namespace: "s", name: "v")
        }
        try await Task.sleep(nanoseconds: 400_000_000)
        #expect(try !store.isHeld(lease))
        let second = try await store.acquireLease(name: "refresh", ttl: 60, timeout: 5, as: SessionLease.self)
        #expect(second.fencingToken == lease.fencingToken + 1)
        _ = expectStoreError(SecretStoreError.leaseLost) {
            try store.transaction { tx throws(SecretStoreError) in
                try tx.requireLease(lease) // the old holder may not commit any more
                try tx.put(Array("stale".utf8), namespace: "s", name: "v")
            }
        }
        #expect(try store.get(namespace: "s", name: "v") == Array("fenced".utf8))
        await #expect(throws: SecretStoreError.self) {
            _ = try await store.acquireLease(name: "refresh", ttl: 5, timeout: 0.2, as: SessionLease.self)
        }
    }
}
