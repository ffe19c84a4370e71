#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import MooseOAuth
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `moose`'s configuration file (`$XDG_CONFIG_HOME/moose/config.toml`): named profiles and which
/// profile a host (a git remote, a registry, a cluster) uses, so credential helpers need no flags.
/// An app reads the same file to log in or renew the way `moose login --profile NAME` does
/// (`load(path:)`, `plan(for:)`).
///
/// ```toml
/// default = "work"
///
/// [profiles.work]
/// issuer = "https://id.example.com"
/// client_id = "moose-cli"
/// scopes = ["openid", "profile", "offline_access"]
/// resource = "https://api.example.com"
/// store = "postgres://moose@db.example.com/moose"   # or a file path
/// dpop = "ES256"
/// public_key_pins = ["sha256//…", "sha256//…"]   # the issuer host's server keys (a backup too)
///
/// [hosts]
/// "git.example.com" = "work"
/// ```
///
/// The file is a strict subset of TOML 1.0: comments, `[table]` headers (dotted, bare or quoted
/// keys), `key = value` with basic ("…") or literal ('…') strings, integers, booleans and one-line
/// arrays of those. Anything else is refused with its line number — a config file is outside
/// input, so the parser is bounded (size, line length, nesting) and never traps.
public struct ProfileFile: Sendable, Equatable {
    /// One profile's settings (`MooseOAuth`'s `ProfileSettings`: the value plan resolution takes,
    /// `SessionPlan.resolve(name:given:profile:kept:)`); this file's parser fills it.
    public typealias ProfileSettings = MooseOAuth.ProfileSettings

    /// The profile commands use without `--profile`.
    public var defaultProfile: String?
    /// Profiles by name.
    public var profiles: [String: ProfileSettings] = [:]
    /// Host (`git.example.com`, `registry.example.com:5000`) → profile name.
    public var hosts: [String: String] = [:]

    /// The largest file read, in bytes.
    public static let maximumSize = 256 * 1024

    /// A refused file: what is wrong and where.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The line (1-based; 0 for the file as a whole).
        public let line: Int
        /// What is wrong there.
        public let message: String
        /// `line N: message`.
        public var description: String { "line \(line): \(message)" }
    }

    /// An empty configuration (no file).
    public init() {}

    /// Parses the file's bytes.
    ///
    /// - Parameter bytes: the file's contents, at most `maximumSize` bytes.
    /// - Throws: `ParseError` naming the line: TOML outside the subset, an unknown table or key, a
    ///   value of the wrong type, a file over `maximumSize`.
    public init(parsing bytes: [UInt8]) throws(ParseError) {
        guard bytes.count <= Self.maximumSize else {
            throw ParseError(line: 0, message: "the file is larger than \(Self.maximumSize) bytes")
        }
        let tables = try TOMLSubset.parse(bytes)
        for (path, entries) in tables {
            switch path.count {
            case 0:
                for (key, entry) in entries {
                    guard key == "default" else {
                        throw ParseError(line: entry.line, message: "unknown top-level key \"\(key)\"")
                    }
                    defaultProfile = try entry.string(key)
                }
            case 1 where path[0] == "hosts":
                // Host names are compared ignoring case: two that differ only in case are one host given twice.
                for (host, entry) in entries.sorted(by: { $0.value.line < $1.value.line }) {
                    guard hosts[host.lowercased()] == nil else {
                        throw ParseError(
                            line: entry.line, message: "host \"\(host)\" is given twice (host names ignore case)")
                    }
                    hosts[host.lowercased()] = try entry.string(host)
                }
            case 2 where path[0] == "profiles":
                var settings = ProfileSettings()
                for (key, entry) in entries {
                    switch key {
                    case "issuer": settings.issuer = try entry.string(key)
                    case "client_id": settings.clientID = try entry.string(key)
                    case "scopes": settings.scopes = try entry.strings(key)
                    case "resource": settings.resource = try entry.string(key)
                    case "store": settings.store = try entry.string(key)
                    case "dpop": settings.dpop = try entry.string(key)
                    case "client_secret_file": settings.clientSecretFile = try entry.string(key)
                    case "ca_file": settings.caFile = try entry.string(key)
                    case "public_key_pins": settings.publicKeyPins = try entry.strings(key)
                    case "grant":
                        let name = try entry.string(key)
                        guard let grant = SessionPlan.Grant.Kind(named: name) else {
                            throw ParseError(
                                line: entry.line,
                                message: "grant must be authorization_code, device_code, client_credentials or workload"
                            )
                        }
                        settings.grant = grant
                    case "client_secret_env": settings.clientSecretEnv = try entry.string(key)
                    case "client_auth": settings.clientAuth = try entry.string(key)
                    case "private_key": settings.privateKeyFile = try entry.string(key)
                    case "key_id": settings.privateKeyID = try entry.string(key)
                    case "audience": settings.audience = try entry.string(key)
                    case "workload": settings.workload = try entry.string(key)
                    case "workload_audience": settings.workloadAudience = try entry.string(key)
                    case "workload_grant": settings.workloadGrant = try entry.string(key)
                    case "subject_token_type": settings.subjectTokenType = try entry.string(key)
                    case "device_endpoint": settings.deviceEndpoint = try entry.string(key)
                    case "port":
                        let port = try entry.integer(key)
                        guard (1...65535).contains(port) else {
                            throw ParseError(line: entry.line, message: "port must be a number from 1 to 65535")
                        }
                        settings.loopbackPort = UInt16(port)
                    default: throw ParseError(line: entry.line, message: "unknown profile key \"\(key)\"")
                    }
                }
                profiles[path[1]] = settings
            default:
                let line = entries.values.map(\.line).min() ?? 0
                throw ParseError(line: line, message: "unknown table [\(path.joined(separator: "."))]")
            }
        }
    }

    /// Where `moose` looks for the file: `$MOOSE_CONFIG`, else `$XDG_CONFIG_HOME/moose/config.toml`,
    /// else `$HOME/.config/moose/config.toml`.
    ///
    /// - Parameter environment: the variables to read (default: the process's).
    /// - Returns: the path, or `nil` when neither `MOOSE_CONFIG`, `XDG_CONFIG_HOME` nor an absolute
    ///   `HOME` is set.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let path = environment["MOOSE_CONFIG"], !path.isEmpty { return path }
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") { return base + "/moose/config.toml" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.config/moose/config.toml" }
        return nil
    }

    /// Reads and parses the file at `path`; a file that does not exist is an empty configuration.
    ///
    /// - Parameter path: the file (`defaultPath()` for `moose`'s own).
    /// - Throws: `OAuthError` with `invalidConfiguration` naming the file: unreadable, larger than
    ///   `maximumSize`, or not parsable (with the line).
    public static func load(path: String) throws -> ProfileFile {
        guard FileManager.default.fileExists(atPath: path) else { return ProfileFile() }
        let bytes = try SessionPlan.readFile(path, what: "config file", limit: maximumSize)
        do {
            return try ProfileFile(parsing: bytes)
        } catch {
            throw OAuthError(OAuthError.invalidConfiguration, "\(path): \(error)")
        }
    }

    /// The plan of profile `name` (the file's `default` when `nil`) as `moose login --profile NAME`
    /// would make it from the file alone: its issuer, client id, scopes (none given: `openid profile
    /// email`), resource, secret file, CA file, pins and DPoP algorithm, for an authorization-code login.
    /// Change `grant` (and the credentials) for a service or workload.
    ///
    /// - Parameter name: the profile; `nil`: the file's `default`, else `"default"`.
    /// - Returns: the plan, or `nil` when the file has no such profile or it lacks `issuer` or `client_id`.
    public func plan(for name: String? = nil) -> SessionPlan? {
        let name = profileName(name)
        guard let settings = profiles[name], let issuer = settings.issuer, let clientID = settings.clientID else {
            return nil
        }
        var plan = SessionPlan(
            name: name, issuer: issuer, clientID: clientID, scopes: settings.scopes ?? SessionPlan.defaultScopes,
            credential: settings.clientSecretFile.map { .secretFile($0, sending: .basic) } ?? .none)
        plan.resource = settings.resource
        plan.dpop = settings.dpop
        plan.provider.caFile = settings.caFile
        plan.provider.publicKeyPins = settings.publicKeyPins ?? []
        return plan
    }

    /// The profile a command or an app works on: `name` when one is given, else the file's `default`,
    /// else `"default"` — the one rule wherever a profile is chosen.
    ///
    /// - Parameter name: the profile asked for (a `--profile` option); `nil`: none.
    /// - Returns: the profile's name.
    public func profileName(_ name: String? = nil) -> String { name ?? defaultProfile ?? "default" }

    /// The profile for `host` (exact, case-insensitive; with or without a port).
    public func profile(forHost host: String) -> String? {
        let host = host.lowercased()
        if let name = hosts[host] { return name }
        if let colon = host.lastIndex(of: ":"), let name = hosts[String(host[..<colon])] { return name }
        return nil
    }

    /// The file as TOML, values only (no comments); parsing it gives this value back. To change the
    /// default of a file a person wrote, `settingDefault(_:in:)` keeps the rest of it.
    public var serialized: String {
        var lines: [String] = []
        if let defaultProfile { lines.append("default = \(TOMLSubset.quote(defaultProfile))") }
        for name in profiles.keys.sorted() {
            guard let settings = profiles[name] else { continue }
            lines.append("")
            lines.append("[profiles.\(TOMLSubset.key(name))]")
            let fields: [(String, String?)] = [
                ("issuer", settings.issuer), ("client_id", settings.clientID), ("grant", settings.grant?.rawValue),
                ("resource", settings.resource), ("store", settings.store), ("dpop", settings.dpop),
                ("client_secret_file", settings.clientSecretFile), ("client_secret_env", settings.clientSecretEnv),
                ("client_auth", settings.clientAuth), ("private_key", settings.privateKeyFile),
                ("key_id", settings.privateKeyID), ("audience", settings.audience), ("ca_file", settings.caFile),
                ("workload", settings.workload), ("workload_audience", settings.workloadAudience),
                ("workload_grant", settings.workloadGrant), ("subject_token_type", settings.subjectTokenType),
                ("device_endpoint", settings.deviceEndpoint)
            ]
            for (key, value) in fields { if let value { lines.append("\(key) = \(TOMLSubset.quote(value))") } }
            if let port = settings.loopbackPort { lines.append("port = \(port)") }
            if let scopes = settings.scopes {
                lines.append("scopes = [" + scopes.map(TOMLSubset.quote).joined(separator: ", ") + "]")
            }
            if let pins = settings.publicKeyPins {
                lines.append("public_key_pins = [" + pins.map(TOMLSubset.quote).joined(separator: ", ") + "]")
            }
        }
        if !hosts.isEmpty {
            lines.append("")
            lines.append("[hosts]")
            for host in hosts.keys.sorted() {
                lines.append("\(TOMLSubset.key(host)) = \(TOMLSubset.quote(hosts[host] ?? ""))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The file `bytes` with `name` as its `default` profile, every other byte as it was: comments,
    /// order, spacing and line ends are a person's and are kept. Where there is a `default = …` line,
    /// only its quoted value is replaced (its indentation and a comment after it stay); else
    /// `default = "NAME"` and a blank line go first (top-level keys come before every table). What
    /// `moose profile use` writes, instead of `serialized`, which keeps only values.
    ///
    /// - Parameters:
    ///   - name: the profile to make the default (quoted as a TOML basic string).
    ///   - bytes: the file as it is (empty: no file yet).
    /// - Returns: the new file; it parses to the configuration `bytes` held with `defaultProfile` set to
    ///   `name`, which is checked before it is returned.
    /// - Throws: `ParseError` when `bytes` do not parse (nothing is rewritten then), when the edited file
    ///   breaks one of the parser's limits (a line, the keys, the size: that error, with its line), or,
    ///   line 0, when it would not read back as that configuration.
    public static func settingDefault(_ name: String, in bytes: [UInt8]) throws(ParseError) -> [UInt8] {
        var expected = try ProfileFile(parsing: bytes)
        expected.defaultProfile = name
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
        // The file's own line end: CRLF when its first line has one.
        let crlf = lines.first?.last == 0x0D && lines.count > 1
        let value = Array(TOMLSubset.quote(name).utf8)
        if let line = try TOMLSubset.parse(bytes)[[]]?["default"]?.line, line >= 1, line <= lines.count {
            let old = lines[line - 1]
            if let range = TOMLSubset.valueRange(in: old) {
                lines[line - 1] = Array(old[..<range.lowerBound]) + value + old[range.upperBound...]
            } else {
                lines[line - 1] = Array("default = ".utf8) + value + (old.last == 0x0D ? [0x0D] : [])
            }
        } else {
            let setting = Array("default = ".utf8) + value
            let end: [UInt8] = crlf ? [0x0D] : []
            lines = bytes.isEmpty ? [setting, []] : [setting + end, end] + lines
        }
        let edited = Array(lines.joined(separator: [0x0A]))
        guard try ProfileFile(parsing: edited) == expected else {
            throw ParseError(line: 0, message: "the file cannot be edited in place to set default = \(name)")
        }
        return edited
    }
}

extension ProfileFile {
    /// Makes `name` the default profile of the file at `path` in place (`settingDefault(_:in:)`): only
    /// the `default` line's value changes, so the comments and layout a person wrote stay. A file that
    /// is a symbolic link (kept in a dotfiles repository) stays a link: the file it names is written —
    /// created, with its folders, when it is not there yet — beside itself with its own mode, then
    /// renamed over itself, so it is never seen half written or with another mode. What `moose profile
    /// use` does.
    ///
    /// - Parameters:
    ///   - name: the profile to make the default.
    ///   - path: the config file (`defaultPath()` for `moose`'s own).
    /// - Throws: `OAuthError` naming the file, which is left as it was: `invalidConfiguration` when it
    ///   cannot be read, does not parse (with the line) or would break the parser's limits;
    ///   `fileSystem` when it cannot be written (its folder cannot be made, the disk is full…).
    public static func setDefault(_ name: String, inFileAt path: String) throws {
        let target = followingLinks(path)
        var info = stat()
        let exists = stat(target, &info) == 0
        let edited: [UInt8]
        do {
            edited = try settingDefault(
                name, in: exists ? try SessionPlan.readFile(target, what: "config file", limit: maximumSize) : [])
        } catch let error as ParseError {
            throw OAuthError(OAuthError.invalidConfiguration, "\(path): \(error); the file is left as it is")
        }
        let folder = URL(fileURLWithPath: target).deletingLastPathComponent().path
        let temporary = target + ".moose-\(getpid())"
        // Each step's own errno, read at once (Foundation's calls in between may change it).
        func failure(_ step: String) -> OAuthError {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            return OAuthError(
                OAuthError.fileSystem, "cannot write \(path) (\(step): \(reason)); the file is left as it is")
        }
        // Folders are made only when the file's own is missing: an existing one never depends on how a
        // system orders EEXIST against EACCES or EROFS for a parent it may not write.
        var made = ""
        for part in folder.split(separator: "/") where access(folder, F_OK) != 0 {
            made += "/" + part
            guard mkdir(made, 0o700) == 0 || errno == EEXIST else { throw failure("making its folder \(made)") }
        }
        let mode = mode_t(exists ? info.st_mode & 0o7777 : 0o644)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw failure("creating \(temporary)") }
        var written = 0
        while written < edited.count {
            let count = edited[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let error = failure("writing")
                close(descriptor)
                throw error
            }
            written += count
        }
        // The mode asked for, whatever the umask took from it.
        guard fchmod(descriptor, mode) == 0 else {
            let error = failure("setting its mode")
            close(descriptor)
            throw error
        }
        guard close(descriptor) == 0 else { throw failure("closing") }
        guard rename(temporary, target) == 0 else { throw failure("renaming it into place") }
    }

    /// `path` with every symbolic link along it followed (relative ones from the link's folder), up to
    /// 16 deep: the file a link names, even one that does not exist yet.
    static func followingLinks(_ path: String) -> String {
        var path = path
        for _ in 0..<16 {
            guard let destination = try? FileManager.default.destinationOfSymbolicLink(atPath: path) else { break }
            path =
                destination.hasPrefix("/")
                ? destination : URL(fileURLWithPath: path).deletingLastPathComponent().path + "/" + destination
        }
        return path
    }
}

/// The TOML subset `ProfileFile` reads.
package enum TOMLSubset {
    /// Where the quoted string value of the one `key = value` in `line` is (its quotes included), in
    /// one pass: the first `=` outside a quoted key, then a basic ("…", with `\` escapes) or literal
    /// ('…') string; `nil` for anything else.
    static func valueRange(in line: [UInt8]) -> Range<Int>? {
        let quote = UInt8(ascii: "\""), apostrophe = UInt8(ascii: "'"), backslash = UInt8(ascii: "\\")
        /// The index just past the string opening at `start`, or `nil` when it is not closed.
        func stringEnd(from start: Int) -> Int? {
            var index = start + 1
            while index < line.count {
                if line[start] == quote, line[index] == backslash {
                    index += 2
                    continue
                }
                if line[index] == line[start] { return index + 1 }
                index += 1
            }
            return nil
        }
        var index = 0
        while index < line.count, line[index] != UInt8(ascii: "=") {
            if line[index] == quote || line[index] == apostrophe {
                guard let end = stringEnd(from: index) else { return nil }
                index = end
            } else {
                index += 1
            }
        }
        index += 1
        while index < line.count, line[index] == 0x20 || line[index] == 0x09 { index += 1 }
        guard index < line.count, line[index] == quote || line[index] == apostrophe,
            let end = stringEnd(from: index)
        else { return nil }
        return index..<end
    }

    /// A value with the line it was on.
    package struct Entry: Sendable, Equatable {
        package enum Value: Sendable, Equatable {
            case string(String), integer(Int64), bool(Bool), array([Value])
        }
        package let value: Value
        package let line: Int

        func string(_ key: String) throws(ProfileFile.ParseError) -> String {
            guard case .string(let text) = value else {
                throw ProfileFile.ParseError(line: line, message: "\(key) must be a string")
            }
            return text
        }

        func integer(_ key: String) throws(ProfileFile.ParseError) -> Int64 {
            guard case .integer(let number) = value else {
                throw ProfileFile.ParseError(line: line, message: "\(key) must be an integer")
            }
            return number
        }

        func strings(_ key: String) throws(ProfileFile.ParseError) -> [String] {
            guard case .array(let items) = value else {
                throw ProfileFile.ParseError(line: line, message: "\(key) must be an array of strings")
            }
            var strings: [String] = []
            for item in items {
                guard case .string(let text) = item else {
                    throw ProfileFile.ParseError(line: line, message: "\(key) must be an array of strings")
                }
                strings.append(text)
            }
            return strings
        }
    }

    static let maximumLineLength = 8192
    static let maximumKeys = 4096

    /// Tables by their key path (`[]` for the top level), each a map of key → entry.
    package static func parse(_ bytes: [UInt8]) throws(ProfileFile.ParseError) -> [[String]: [String: Entry]] {
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw ProfileFile.ParseError(line: 0, message: "the file is not UTF-8")
        }
        var tables: [[String]: [String: Entry]] = [[]: [:]]
        var current: [String] = []
        var count = 0
        // Lines split on the LF byte (Swift treats "\r\n" as one Character: never split text on "\n").
        for (index, rawLine) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            var line = Array(rawLine)
            if line.last == 0x0D { line.removeLast() }
            guard line.count <= maximumLineLength else {
                throw ProfileFile.ParseError(line: number, message: "the line is too long")
            }
            var cursor = Cursor(bytes: line, line: number)
            cursor.skipSpace()
            if cursor.atEnd || cursor.peek == UInt8(ascii: "#") { continue }
            if cursor.peek == UInt8(ascii: "[") {
                cursor.advance()
                if cursor.peek == UInt8(ascii: "[") { throw cursor.error("arrays of tables are not supported") }
                let path = try cursor.keyPath()
                cursor.skipSpace()
                guard cursor.peek == UInt8(ascii: "]") else { throw cursor.error("expected ] after the table name") }
                cursor.advance()
                try cursor.endOfLine()
                guard tables[path] == nil || path.isEmpty else {
                    throw cursor.error("table [\(path.joined(separator: "."))] is defined twice")
                }
                tables[path] = tables[path] ?? [:]
                current = path
                continue
            }
            let path = try cursor.keyPath()
            cursor.skipSpace()
            guard cursor.peek == UInt8(ascii: "=") else { throw cursor.error("expected = after the key") }
            cursor.advance()
            cursor.skipSpace()
            let value = try cursor.value(depth: 0)
            try cursor.endOfLine()
            guard path.count == 1 else { throw cursor.error("dotted keys are not supported; use a [table]") }
            count += 1
            guard count <= maximumKeys else { throw cursor.error("too many keys") }
            guard tables[current]?[path[0]] == nil else { throw cursor.error("key \(path[0]) is defined twice") }
            tables[current, default: [:]][path[0]] = Entry(value: value, line: number)
        }
        return tables
    }

    /// A basic string with every character TOML requires escaped.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// A key, bare when it can be.
    static func key(_ text: String) -> String {
        !text.isEmpty && text.utf8.allSatisfy(Cursor.isBareKeyByte) ? text : quote(text)
    }

    struct Cursor {
        let bytes: [UInt8]
        let line: Int
        var index = 0

        var atEnd: Bool { index >= bytes.count }
        var peek: UInt8? { atEnd ? nil : bytes[index] }
        mutating func advance() { index += 1 }

        func error(_ message: String) -> ProfileFile.ParseError { ProfileFile.ParseError(line: line, message: message) }

        mutating func skipSpace() { while let byte = peek, byte == 0x20 || byte == 0x09 { advance() } }

        mutating func endOfLine() throws(ProfileFile.ParseError) {
            skipSpace()
            guard atEnd || peek == UInt8(ascii: "#") else { throw error("unexpected text after the value") }
        }

        static func isBareKeyByte(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D
                || byte == 0x5F
        }

        mutating func keyPath() throws(ProfileFile.ParseError) -> [String] {
            var path: [String] = []
            while true {
                skipSpace()
                path.append(try key())
                guard path.count <= 8 else { throw error("the key has too many parts") }
                skipSpace()
                guard peek == UInt8(ascii: ".") else { return path }
                advance()
            }
        }

        mutating func key() throws(ProfileFile.ParseError) -> String {
            if peek == UInt8(ascii: "\"") || peek == UInt8(ascii: "'") { return try string() }
            let start = index
            while let byte = peek, Self.isBareKeyByte(byte) { advance() }
            guard index > start else { throw error("expected a key") }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func value(depth: Int) throws(ProfileFile.ParseError) -> Entry.Value {
            guard let byte = peek else { throw error("expected a value") }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                return .string(try string())
            case UInt8(ascii: "["):
                guard depth < 4 else { throw error("arrays nest too deeply") }
                advance()
                var items: [Entry.Value] = []
                while true {
                    skipSpace()
                    if atEnd { throw error("the array is not closed (arrays must fit on one line)") }
                    if peek == UInt8(ascii: "]") { advance(); return .array(items) }
                    items.append(try value(depth: depth + 1))
                    guard items.count <= 1024 else { throw error("the array is too long") }
                    skipSpace()
                    if peek == UInt8(ascii: ",") { advance(); continue }
                    guard peek == UInt8(ascii: "]") else {
                        throw error("expected , or ] in the array (arrays must fit on one line)")
                    }
                }
            case UInt8(ascii: "t"), UInt8(ascii: "f"):
                for (word, flag) in [("true", true), ("false", false)] where bytes[index...].starts(with: word.utf8) {
                    index += word.utf8.count
                    return .bool(flag)
                }
                throw error("expected a value")
            default:
                let start = index
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { advance() }
                while let digit = peek, (0x30...0x39).contains(digit) || digit == UInt8(ascii: "_") { advance() }
                let digits = String(decoding: bytes[start..<index].filter { $0 != UInt8(ascii: "_") }, as: UTF8.self)
                guard index > start, let number = Int64(digits) else {
                    throw error("expected a string, integer, boolean or array")
                }
                return .integer(number)
            }
        }

        /// A basic ("…", with escapes) or literal ('…') one-line string.
        mutating func string() throws(ProfileFile.ParseError) -> String {
            guard let quote = peek else { throw error("expected a string") }
            advance()
            if bytes[index...].starts(with: [quote, quote]) { throw error("multi-line strings are not supported") }
            var out: [UInt8] = []
            while true {
                guard let byte = peek else { throw error("the string is not closed") }
                advance()
                if byte == quote { break }
                if byte < 0x20 && byte != 0x09 || byte == 0x7F {
                    throw error("control characters must be escaped in strings")
                }
                guard quote == UInt8(ascii: "\""), byte == UInt8(ascii: "\\") else { out.append(byte); continue }
                guard let escape = peek else { throw error("the string is not closed") }
                advance()
                switch escape {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"), UInt8(ascii: "U"):
                    let length = escape == UInt8(ascii: "u") ? 4 : 8
                    guard index + length <= bytes.count,
                        bytes[index..<(index + length)].allSatisfy({
                            (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0)
                        }),
                        let value = UInt32(String(decoding: bytes[index..<(index + length)], as: UTF8.self), radix: 16),
                        let scalar = Unicode.Scalar(value)
                    else { throw error("bad \\u escape") }
                    index += length
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw error("unknown escape in a string")
                }
            }
            return String(decoding: out, as: UTF8.self)
        }
    }
}
