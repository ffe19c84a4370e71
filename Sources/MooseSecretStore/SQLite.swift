internal import CSQLite
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A SQLite failure: the primary result code, the extended code, SQLite's message and the file.
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let extendedCode: Int32
    let message: String
    let context: String
    /// The store file the connection had open (or tried to open).
    let path: String

    var description: String { "\(context): \(message) (SQLite \(extendedCode))" }

    /// The store-level error this maps to: each names the file and what to do next. None of them
    /// changes or deletes data.
    var storeError: SecretStoreError {
        switch code {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return SecretStoreError(
                SecretStoreError.busy,
                "\(path) is locked by another process (\(message)); try again when it is done (`fuser \(path)` names it)",
                underlying: description)
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return SecretStoreError(
                SecretStoreError.corrupt,
                "\(path) is damaged or not a Moose store (\(message)); restore it from a backup, "
                    + "or move it aside to start over with a new store",
                underlying: description)
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH:
            return SecretStoreError(
                SecretStoreError.permission,
                "\(path) cannot be written (\(message)); check the permissions of the file and its folder "
                    + "(`ls -l`), and whether the file is immutable (`lsattr`)",
                underlying: description)
        case SQLITE_CANTOPEN:
            if let fault = FileSystem.whyUnopenable(path) { return fault }
            return SecretStoreError(
                SecretStoreError.io,
                "cannot open \(path) (\(message)); check that it is a file, and that its folder exists and can be "
                    + "written (SQLite keeps its journal beside the file)",
                underlying: description)
        case SQLITE_FULL:
            return SecretStoreError(
                SecretStoreError.io, "the disk holding \(path) is full (\(message)); free some space and try again",
                underlying: description)
        case SQLITE_IOERR:
            return SecretStoreError(
                SecretStoreError.io, "I/O error on \(path) (\(message)); check the disk and the file's permissions",
                underlying: description)
        default:
            return SecretStoreError(
                SecretStoreError.io, "SQLite error on \(path) (\(message))", underlying: description)
        }
    }
}

/// How a connection opens its file.
struct OpenMode: OptionSet {
    let rawValue: Int32
    static let readOnly = OpenMode(rawValue: SQLITE_OPEN_READONLY)
    static let readWrite = OpenMode(rawValue: SQLITE_OPEN_READWRITE)
    static let create = OpenMode(rawValue: SQLITE_OPEN_CREATE)
}

/// One SQLite connection (owns the `sqlite3*`, closed in `deinit`) with a prepared-statement cache.
///
/// Not thread-safe by itself: `SecretStore` serialises every use behind a lock.
final class SQLiteConnection {
    private let handle: OpaquePointer
    private var statements: [UInt: Statement] = [:]
    private var used: [Statement] = []
    let path: String

    init(path: String, mode: OpenMode, busyTimeout: Int32 = 5_000) throws(SQLiteError) {
        self.path = path
        var db: OpaquePointer? = nil
        // FULLMUTEX off: the store serialises access itself. No URI parsing: paths are taken literally.
        let flags = mode.rawValue | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: rc & 0xFF, extendedCode: rc, message: message, context: "open", path: path)
        }
        handle = db
        sqlite3_busy_timeout(db, busyTimeout)
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    func error(_ rc: Int32, _ context: String) -> SQLiteError {
        SQLiteError(
            code: rc & 0xFF, extendedCode: sqlite3_extended_errcode(handle),
            message: String(cString: sqlite3_errmsg(handle)), context: context, path: path)
    }

    /// Runs one or more statements without results (pragmas, DDL, BEGIN/COMMIT).
    func execute(_ sql: String) throws(SQLiteError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql.split(separator: " ").prefix(3).joined(separator: " ")) }
    }

    /// A cached prepared statement, reset and with its bindings cleared. Keyed by the literal's
    /// address: every SQL text here is a `StaticString`, so the lookup never hashes the text.
    func statement(_ sql: StaticString) throws(SQLiteError) -> Statement {
        let key = UInt(bitPattern: sql.utf8Start)
        if let cached = statements[key] {
            cached.reset()
            used.append(cached)
            return cached
        }
        var raw: OpaquePointer? = nil
        let rc = sql.withUTF8Buffer { text in
            text.withMemoryRebound(to: CChar.self) {
                sqlite3_prepare_v3(
                    handle, $0.baseAddress, Int32($0.count), UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
            }
        }
        guard rc == SQLITE_OK, let raw else { throw error(rc, "prepare") }
        let statement = Statement(takingOwnershipOf: raw, connection: self)
        statements[key] = statement
        used.append(statement)
        return statement
    }

    /// Resets every cached statement, ending any read they keep open (a stepped-but-unfinished
    /// statement holds a read transaction, which blocks checkpoints and journal-mode changes).
    func resetAll() {
        for statement in used { statement.reset() }
        used.removeAll(keepingCapacity: true)
    }

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` (takes the write lock up front, so a writer never
    /// deadlocks upgrading a read lock) or `BEGIN DEFERRED`. Rolls back on any error.
    func transaction<R>(immediate: Bool, _ body: () throws -> R) throws -> R {
        try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        do {
            let result = try body()
            resetAll()
            try execute("COMMIT")
            return result
        } catch {
            resetAll()
            _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    /// `PRAGMA name` as an integer.
    func pragmaInteger(_ name: String) throws(SQLiteError) -> Int64 {
        var raw: OpaquePointer? = nil
        let rc = sqlite3_prepare_v2(handle, "PRAGMA \(name)", -1, &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw error(rc, "PRAGMA \(name)") }
        defer { sqlite3_finalize(raw) }
        let step = sqlite3_step(raw)
        if step == SQLITE_ROW { return sqlite3_column_int64(raw, 0) }
        if step == SQLITE_DONE { return 0 }
        throw error(step, "PRAGMA \(name)")
    }

    var changes: Int { Int(sqlite3_changes(handle)) }

    var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }
}

/// A prepared statement (owns the `sqlite3_stmt*`, finalized in `deinit`).
final class Statement {
    private let handle: OpaquePointer
    private unowned let connection: SQLiteConnection

    init(takingOwnershipOf handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    // Binding: SQLITE_TRANSIENT makes SQLite copy the bytes, so Swift buffers may go away afterwards.

    func bind(_ index: Int32, _ text: String) throws(SQLiteError) {
        // The string's own UTF-8 with its length: no C-string copy, no strlen (an implicit
        // String-to-pointer conversion made a `utf8CString` array on every read).
        var text = text
        let rc = text.withUTF8 { utf8 in
            guard let length = Int32(exactly: utf8.count) else { return SQLITE_TOOBIG }
            guard let start = utf8.baseAddress else {
                return sqlite3_bind_text(handle, index, "", 0, moose_sqlite_transient())
            }
            return sqlite3_bind_text(
                handle, index, UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self), length,
                moose_sqlite_transient())
        }
        guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
    }

    func bind(_ index: Int32, _ value: Int64) throws(SQLiteError) {
        let rc = sqlite3_bind_int64(handle, index, value)
        guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
    }

    func bind(_ index: Int32, blob bytes: [UInt8]) throws(SQLiteError) {
        let rc = bytes.withUnsafeBytes { buffer in
            sqlite3_bind_blob(
                handle, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buffer.count),
                moose_sqlite_transient())
        }
        guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
    }

    func bindNull(_ index: Int32) throws(SQLiteError) {
        let rc = sqlite3_bind_null(handle, index)
        guard rc == SQLITE_OK else { throw connection.error(rc, "bind") }
    }

    /// Advances; `true` when a row is available, `false` when done.
    @discardableResult
    func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = connection.error(rc, "step")
            sqlite3_reset(handle)
            throw error
        }
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func text(_ column: Int32) -> String? {
        guard let raw = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: raw, count: count), as: UTF8.self)
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let raw = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: raw, count: count))
    }

    /// The blob's bytes, valid only inside `body` (SQLite's own memory: no copy).
    func withBlob<R>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: sqlite3_column_blob(handle, column), count: count))
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
}
