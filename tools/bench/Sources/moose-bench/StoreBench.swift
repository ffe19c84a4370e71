import CFloor
import Foundation
import MooseCrypto
import MooseSealing
import MooseSecretStore

/// MooseSecretStore against plain SQLite (same schema, same durability), SQLCipher, and the AES-GCM
/// part against libcrypto's own throughput. 1 KiB values, one transaction per operation.
enum StoreBench {
    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1000 } // µs

    static func run(rows: Int, sqlcipher: String?) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "moose-store-bench-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let value = (0..<1024).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let key = try SecureRandom.bytes(count: 32)

        print("\n## Secret store: \(rows) rows of 1 KiB, one transaction per operation (µs per operation, median)\n")
        print(
            "| durability | operation | plain SQLite (C) | SQLCipher 3.4 (C, raw key) | Moose | Moose / plain | target | Moose / SQLCipher |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for (label, full) in [("NORMAL", false), ("FULL", true)] {
            let count = full ? min(rows, 2000) : rows
            let plain = store_floor_open("\(folder)/plain-\(label).db", full ? 1 : 0, nil)!
            let store = try SecretStore(
                path: "\(folder)/moose-\(label).sqlite", masterKey: .raw(key),
                durability: full ? .full : .normal)
            var plainPut: [Double] = [], moosePut: [Double] = []
            // Interleave in blocks of 100 so machine drift hits both alike.
            for block in stride(from: 0, to: count, by: 100) {
                for i in block..<min(block + 100, count) {
                    let t0 = now(); _ = store_floor_put(plain, "item-\(i)", value, value.count);
                    plainPut.append(now() - t0)
                }
                for i in block..<min(block + 100, count) {
                    let t0 = now(); try store.put(value, namespace: "bench", name: "item-\(i)");
                    moosePut.append(now() - t0)
                }
            }
            var plainGet: [Double] = [], mooseGet: [Double] = []
            var out = [UInt8](repeating: 0, count: 2048)
            for block in stride(from: 0, to: count, by: 100) {
                for i in block..<min(block + 100, count) {
                    let name = "item-\((i &* 7919) % count)"
                    let t0 = now(); let got = store_floor_get(plain, name, &out, out.count);
                    plainGet.append(now() - t0); if got != 1024 { fatalError("plain get failed") }
                }
                for i in block..<min(block + 100, count) {
                    let name = "item-\((i &* 7919) % count)"
                    let t0 = now(); let got = try store.get(namespace: "bench", name: name);
                    mooseGet.append(now() - t0); if got?.count != 1024 { fatalError("moose get failed") }
                }
            }
            store_floor_close(plain)
            var cipher: (put: Double, get: Double)? = nil
            if let sqlcipher {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: sqlcipher)
                process.arguments = [folder, String(count), full ? "1" : "0"]
                let pipe = Pipe()
                process.standardOutput = pipe
                try process.run()
                process.waitUntilExit()
                let fields = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                    .split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                if fields.count == 4 {
                    cipher = (fields[2], fields[3])
                    sqlcipherOpen = (fields[0], fields[1])
                }
            }
            for (operation, p, m, c) in [
                ("put", median(plainPut), median(moosePut), cipher?.put),
                ("get", median(plainGet), median(mooseGet), cipher?.get)
            ] {
                let cipherText = c.map { String(format: "%.1f", $0) } ?? "—"
                let versus = c.map { String(format: "%.2fx", m / $0) } ?? "—"
                print(
                    "| \(label) | \(operation) | \(String(format: "%.1f", p)) | \(cipherText) | \(String(format: "%.1f", m)) | \(String(format: "%.2fx", m / p)) | ≤ 1.3x | \(versus) |"
                )
            }
        }

        // The AES-GCM part alone: Moose's AESGCM (fresh context per message) vs EVP with a reused context.
        let gcmKey = try SecretKey(randomByteCount: 32)
        let aad = Array("moose-secret/v1 bench item-1".utf8)
        let floorContext = key.withUnsafeBufferPointer { gcm_floor_new($0.baseAddress) }!
        var iv = [UInt8](repeating: 7, count: 12), sealedOut = [UInt8](repeating: 0, count: 1024),
            tag = [UInt8](repeating: 0, count: 16)
        var openedOut = [UInt8](repeating: 0, count: 1024)
        let box = try AESGCM.seal(value, using: gcmKey, authenticating: aad)
        var floorSeal: [Double] = [], floorOpen: [Double] = [], mooseSeal: [Double] = [], mooseOpen: [Double] = []
        var contextSeal: [Double] = [], contextOpen: [Double] = []
        let context = try AESGCM.Context(key: gcmKey)
        let combined = try context.sealCombined(value, authenticating: aad)
        for _ in 0..<20 {
            var t0 = now()
            for _ in 0..<1000 {
                _ = gcm_floor_seal(floorContext, &iv, aad, aad.count, value, value.count, &sealedOut, &tag)
            }
            floorSeal.append((now() - t0) / 1000)
            t0 = now()
            for _ in 0..<1000 {
                _ = gcm_floor_open(floorContext, &iv, aad, aad.count, sealedOut, 1024, &openedOut, tag)
            }
            floorOpen.append((now() - t0) / 1000)
            t0 = now()
            for _ in 0..<1000 { _ = try AESGCM.seal(value, using: gcmKey, authenticating: aad) }
            mooseSeal.append((now() - t0) / 1000)
            t0 = now()
            for _ in 0..<1000 { _ = try AESGCM.open(box, using: gcmKey, authenticating: aad) }
            mooseOpen.append((now() - t0) / 1000)
            t0 = now()
            for _ in 0..<1000 { _ = try context.sealCombined(value, authenticating: aad) }
            contextSeal.append((now() - t0) / 1000)
            t0 = now()
            for _ in 0..<1000 { _ = try context.openCombined(combined, authenticating: aad) }
            contextOpen.append((now() - t0) / 1000)
        }
        gcm_floor_free(floorContext)
        print("\n### The AES-256-GCM part (1 KiB, µs per message)\n")
        print(
            "| | libcrypto EVP, context reused (C) | Moose `AESGCM.Context` (the store's path; random nonce) | ratio | Moose one-shot `AESGCM` (context per message) | ratio |"
        )
        print("|---|---|---|---|---|---|")
        for (label, floor, ctx, oneShot) in [
            ("seal", floorSeal, contextSeal, mooseSeal), ("open", floorOpen, contextOpen, mooseOpen)
        ] {
            let f = median(floor), c = median(ctx), o = median(oneShot)
            print(
                "| \(label) | \(String(format: "%.2f", f)) | \(String(format: "%.2f", c)) | \(String(format: "%.2fx", c / f)) | \(String(format: "%.2f", o)) | \(String(format: "%.2fx", o / f)) |"
            )
        }

        // Opening a store, per key source.
        print("\n### Opening a store and reading one value (ms, median)\n")
        print("| | ms |")
        print("|---|---|")
        let path = "\(folder)/open.sqlite"
        let keyFile = "\(folder)/open.key"
        let seed = try SecretStore(path: path, masterKey: .keyFile(keyFile))
        try seed.put(value, namespace: "bench", name: "item-1")
        setenv("MOOSE_BENCH_KEY", Data(try SecureRandom.bytes(count: 32)).base64EncodedString(), 1)
        let envPath = "\(folder)/env.sqlite"
        _ = try SecretStore(path: envPath, masterKey: .environment("MOOSE_BENCH_KEY"))
        let passPath = "\(folder)/pass.sqlite"
        _ = try SecretStore(path: passPath, masterKey: .passphrase("correct horse battery staple"))
        var plainOpen: [Double] = []
        var out = [UInt8](repeating: 0, count: 2048)
        for _ in 0..<21 {
            let t0 = now()
            let s = store_floor_open("\(folder)/plain-FULL.db", 1, nil)!
            _ = store_floor_get(s, "item-1", &out, out.count)
            store_floor_close(s)
            plainOpen.append((now() - t0) / 1000)
        }
        print("| plain SQLite (C) | \(String(format: "%.2f", median(plainOpen))) |")
        for (label, source, file, runs) in [
            ("Moose, key file", MasterKeySource.keyFile(keyFile), path, 21),
            ("Moose, environment variable", .environment("MOOSE_BENCH_KEY"), envPath, 21),
            ("Moose, passphrase (scrypt N=2^16, r=8)", .passphrase("correct horse battery staple"), passPath, 7)
        ] {
            var samples: [Double] = []
            for _ in 0..<runs {
                let t0 = now()
                let s = try SecretStore(path: file, masterKey: source, create: false)
                _ = try s.get(namespace: "bench", name: "item-1")
                samples.append((now() - t0) / 1000)
            }
            print("| \(label) | \(String(format: "%.2f", median(samples))) |")
        }
        if let (passphrase, raw) = sqlcipherOpen {
            print("| SQLCipher 3.4, raw key (C) | \(String(format: "%.2f", raw)) |")
            print("| SQLCipher 3.4, passphrase (PBKDF2 on every open) (C) | \(String(format: "%.2f", passphrase)) |")
        }
    }

    // unchecked: written once by the SQLCipher run, read after it, both on the benchmark's one thread.
    nonisolated(unsafe) static var sqlcipherOpen: (Double, Double)? = nil
}
