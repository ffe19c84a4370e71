import Foundation

/// Damages one row of a real SQLite secret store file the way bit rot or a torn copy would: one bit
/// of its sealed value flipped (after the 12-byte nonce), written with Python's own sqlite3 module —
/// another program on the same file, not Moose's code. Throws when no such row exists.
public enum DamagedRow {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static func flip(storePath: String, namespace: String = "moose.session", name: String) throws {
        let script = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], timeout=10)
            row = db.execute("SELECT sealed FROM secrets WHERE namespace=? AND name=?", (sys.argv[2], sys.argv[3])).fetchone()
            if row is None: sys.exit("no row " + sys.argv[2] + "/" + sys.argv[3])
            sealed = bytearray(row[0]); sealed[20] ^= 0x01
            db.execute("UPDATE secrets SET sealed=? WHERE namespace=? AND name=?", (bytes(sealed), sys.argv[2], sys.argv[3]))
            db.commit()
            """
        let result = runProcess(["/usr/bin/env", "python3", "-c", script, storePath, namespace, name])
        guard result.status == 0 else {
            throw Failure(description: "could not damage \(namespace)/\(name) in \(storePath): \(result.output)")
        }
    }
}
