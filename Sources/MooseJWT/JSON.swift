/// A JSON value with object members kept in document order.
///
/// JOSE headers and claim sets are parsed into this type by a strict RFC 8259 parser with a depth
/// limit, duplicate-member rejection (RFC 7515 §5.2) and UTF-8 validation.
///
/// ```swift
/// let value = try JSONValue(parsing: Array(#"{"sub":"42","admin":true}"#.utf8))
/// value["sub"]?.stringValue   // "42"
/// ```
public enum JSONValue: Sendable, Hashable {
    /// `null`
    case null
    /// `true` / `false`
    case bool(Bool)
    /// A number, kept as its exact source text.
    case number(JSONNumber)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, members in document order.
    case object(JSONObject)

    /// The string, if this is a string.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The number as a `Double`, if this is a number.
    public var doubleValue: Double? { if case .number(let n) = self { n.doubleValue } else { nil } }
    /// The number as an `Int64`, if this is an integral number that fits.
    public var int64Value: Int64? { if case .number(let n) = self { n.int64Value } else { nil } }
    /// The Boolean, if this is `true` or `false`.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    /// The object, if this is an object.
    public var objectValue: JSONObject? { if case .object(let o) = self { o } else { nil } }

    /// The member named `key`, if this is an object that has it.
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// A short name of the value's type, for error messages (`string`, `number`…).
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// A JSON number, kept as its source text so it prints exactly as it was written.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number's text, as in the document (`1300819380`, `1.5e3`).
    public let text: String

    /// A number from its JSON text; the text is not re-validated.
    init(text: String) { self.text = text }

    /// A number from an integer.
    public init(_ value: Int64) { text = String(value) }

    /// A number from a double. JSON has no infinities or NaN: those become the largest finite
    /// number of the same sign, and 0.
    public init(_ value: Double) {
        let finite = value.isNaN ? 0 : min(max(value, -.greatestFiniteMagnitude), .greatestFiniteMagnitude)
        if finite.rounded() == finite, abs(finite) < 9.0e15 { text = String(Int64(finite)) } else { text = "\(finite)" }
    }

    /// The value as a `Double`.
    public var doubleValue: Double { Double(text) ?? .nan }

    /// The value as an `Int64`, when it is integral and fits.
    public var int64Value: Int64? {
        if let exact = Int64(text) { return exact }
        let double = doubleValue
        guard double.isFinite, double.rounded() == double, abs(double) < 9.2e18 else { return nil }
        return Int64(double)
    }

    /// The number's text.
    public var description: String { text }
}

/// A JSON object: members in document order, looked up by name.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// One member.
    public struct Member: Sendable, Hashable {
        /// The member name.
        public var key: String
        /// The member value.
        public var value: JSONValue
    }

    /// The members, in order.
    public private(set) var members: [Member]

    /// An object with the given members (later duplicates replace earlier ones).
    public init(_ members: [(String, JSONValue)] = []) {
        self.members = []
        for (key, value) in members { self[key] = value }
    }

    /// `["sub": .string("42")]`
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }

    init(unchecked members: [Member]) { self.members = members }

    /// The value for `key`; setting `nil` removes the member, setting a new key appends it.
    public subscript(key: String) -> JSONValue? {
        get {
            for member in members where member.key == key { return member.value }
            return nil
        }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
            }
        }
    }

    /// The member names, in order.
    public var keys: [String] { members.map(\.key) }

    /// The number of members.
    public var count: Int { members.count }

    /// Iterates members in order.
    public func makeIterator() -> IndexingIterator<[Member]> { members.makeIterator() }
}

// MARK: - Parsing

extension JSONValue {
    /// The default maximum nesting depth: deeper documents are refused, not recursed into.
    public static let defaultMaximumDepth = 32

    /// Parses a complete JSON document.
    ///
    /// - Throws: `JWTError.invalidJSON` with the byte offset of the problem.
    public init(parsing bytes: [UInt8], maximumDepth: Int = JSONValue.defaultMaximumDepth) throws(JWTError) {
        self = try typed {
            try bytes.withUnsafeBufferPointer { buffer in
                try JSONValue(parsing: buffer, maximumDepth: maximumDepth, context: "JSON")
            }
        }
    }

    init(parsing buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int, context: String) throws(JWTError) {
        var parser = JSONParser(input: buffer, maximumDepth: maximumDepth, context: context)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        if parser.index != buffer.count { throw parser.error("unexpected data after the JSON value") }
        self = value
    }
}

struct JSONParser {
    let input: UnsafeBufferPointer<UInt8>
    let maximumDepth: Int
    let context: String
    var index = 0

    init(input: UnsafeBufferPointer<UInt8>, maximumDepth: Int, context: String) {
        self.input = input
        self.maximumDepth = maximumDepth
        self.context = context
    }

    func error(_ message: String) -> JWTError {
        JWTError(JWTError.invalidJSON, "\(context) is not valid JSON: \(message) at byte \(index)", position: index)
    }

    mutating func skipWhitespace() {
        while index < input.count {
            switch input[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JWTError) -> JSONValue {
        guard index < input.count else { throw error("unexpected end of input") }
        switch input[index] {
        case UInt8(ascii: "{"): return .object(try parseObject(depth: depth + 1))
        case UInt8(ascii: "["): return .array(try parseArray(depth: depth + 1))
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JWTError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= input.count else { throw error("unexpected end of input") }
        for offset in 0..<count where input[index + offset] != literal.utf8Start[offset] {
            throw error("invalid literal")
        }
        index += count
    }

    mutating func parseObject(depth: Int) throws(JWTError) -> JSONObject {
        if depth > maximumDepth { throw error("nesting deeper than \(maximumDepth) levels") }
        index += 1
        var members: [JSONObject.Member] = []
        skipWhitespace()
        if index < input.count, input[index] == UInt8(ascii: "}") {
            index += 1
            return JSONObject(unchecked: members)
        }
        while true {
            skipWhitespace()
            guard index < input.count, input[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let keyStart = index
            let key = try parseString()
            for member in members where member.key == key {
                index = keyStart
                throw error("duplicate member \"\(key)\"")
            }
            skipWhitespace()
            guard index < input.count, input[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            members.append(JSONObject.Member(key: key, value: value))
            skipWhitespace()
            guard index < input.count else { throw error("unexpected end of input in an object") }
            if input[index] == UInt8(ascii: ",") { index += 1; continue }
            if input[index] == UInt8(ascii: "}") { index += 1; return JSONObject(unchecked: members) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(JWTError) -> [JSONValue] {
        if depth > maximumDepth { throw error("nesting deeper than \(maximumDepth) levels") }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < input.count, input[index] == UInt8(ascii: "]") {
            index += 1
            return elements
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < input.count else { throw error("unexpected end of input in an array") }
            if input[index] == UInt8(ascii: ",") { index += 1; continue }
            if input[index] == UInt8(ascii: "]") { index += 1; return elements }
            throw error("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws(JWTError) -> JSONNumber {
        let start = index
        if input[index] == UInt8(ascii: "-") { index += 1 }
        guard index < input.count else { throw error("incomplete number") }
        if input[index] == UInt8(ascii: "0") {
            index += 1
            if index < input.count, isDigit(input[index]) { throw error("leading zero in a number") }
        } else if isDigit(input[index]) {
            while index < input.count, isDigit(input[index]) { index += 1 }
        } else {
            throw error("invalid number")
        }
        if index < input.count, input[index] == UInt8(ascii: ".") {
            index += 1
            guard index < input.count, isDigit(input[index]) else { throw error("digit expected after '.'") }
            while index < input.count, isDigit(input[index]) { index += 1 }
        }
        if index < input.count, input[index] == UInt8(ascii: "e") || input[index] == UInt8(ascii: "E") {
            index += 1
            if index < input.count, input[index] == UInt8(ascii: "+") || input[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < input.count, isDigit(input[index]) else { throw error("digit expected in exponent") }
            while index < input.count, isDigit(input[index]) { index += 1 }
        }
        if index - start > 64 { throw error("number longer than 64 characters") }
        return JSONNumber(text: String(decoding: UnsafeBufferPointer(rebasing: input[start..<index]), as: UTF8.self))
    }

    @inline(__always) func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    mutating func parseString() throws(JWTError) -> String {
        index += 1 // opening quote
        let start = index
        // Fast path: no escapes.
        while index < input.count {
            let byte = input[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: input[start..<index])
                index += 1
                return try validated(slice, at: start)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("control character in a string") }
            index += 1
        }
        var bytes = Array(UnsafeBufferPointer(rebasing: input[start..<index]))
        while index < input.count {
            let byte = input[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                let parser = self
                return try typed {
                    try bytes.withUnsafeBufferPointer { buffer in
                        try parser.validated(buffer, at: start)
                    }
                }
            case UInt8(ascii: "\\"):
                index += 1
                guard index < input.count else { throw error("unfinished escape") }
                let escape = input[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): bytes.append(0x22)
                case UInt8(ascii: "\\"): bytes.append(0x5C)
                case UInt8(ascii: "/"): bytes.append(0x2F)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < input.count, input[index] == UInt8(ascii: "\\"),
                            input[index + 1] == UInt8(ascii: "u")
                        else {
                            throw error("unpaired surrogate escape")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                    bytes.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    throw error("invalid escape")
                }
            default:
                if byte < 0x20 { throw error("control character in a string") }
                bytes.append(byte)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    mutating func parseHex4() throws(JWTError) -> UInt32 {
        guard index + 4 <= input.count else { throw error("incomplete \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = input[index]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    func validated(_ bytes: UnsafeBufferPointer<UInt8>, at start: Int) throws(JWTError) -> String {
        // ASCII is always valid; only validate when a high byte appears.
        var ascii = true
        for byte in bytes where byte >= 0x80 { ascii = false; break }
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw JWTError(
                JWTError.invalidJSON, "\(context) is not valid JSON: invalid UTF-8 in the string at byte \(start)",
                position: start)
        }
        return string
    }
}

// MARK: - Writing

extension JSONValue {
    /// Compact JSON text (no whitespace), members in order.
    public func serialized() -> String {
        var output = ""
        write(to: &output, indent: nil, level: 0)
        return output
    }

    /// Indented JSON text (two spaces), members in order, for people to read.
    public func prettyPrinted() -> String {
        var output = ""
        write(to: &output, indent: "  ", level: 0)
        return output
    }

    func write(to output: inout String, indent: String?, level: Int) {
        switch self {
        case .null: output += "null"
        case .bool(let b): output += b ? "true" : "false"
        case .number(let n): output += n.text
        case .string(let s): JSONValue.writeString(s, to: &output)
        case .array(let elements):
            if elements.isEmpty { output += "[]"; return }
            output += "["
            for (offset, element) in elements.enumerated() {
                if offset > 0 { output += "," }
                if let indent { output += "\n" + String(repeating: indent, count: level + 1) }
                element.write(to: &output, indent: indent, level: level + 1)
            }
            if let indent { output += "\n" + String(repeating: indent, count: level) }
            output += "]"
        case .object(let object):
            if object.count == 0 { output += "{}"; return }
            output += "{"
            for (offset, member) in object.members.enumerated() {
                if offset > 0 { output += "," }
                if let indent { output += "\n" + String(repeating: indent, count: level + 1) }
                JSONValue.writeString(member.key, to: &output)
                output += indent == nil ? ":" : ": "
                member.value.write(to: &output, indent: indent, level: level + 1)
            }
            if let indent { output += "\n" + String(repeating: indent, count: level) }
            output += "}"
        }
    }

    /// U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069: characters that reorder displayed text.
    package static func isBidiControl(_ value: UInt32) -> Bool {
        value == 0x061C || (0x200E...0x200F).contains(value) || (0x202A...0x202E).contains(value)
            || (0x2066...0x2069).contains(value)
    }

    static func writeString(_ string: String, to output: inout String) {
        output += "\""
        // Runs of characters that need no escape are appended as slices of `string` (a copy of
        // their bytes), not scalar by scalar.
        let scalars = string.unicodeScalars
        var runStart = scalars.startIndex
        var index = runStart
        while index != scalars.endIndex {
            let scalar = scalars[index]
            let next = scalars.index(after: index)
            if let escaped = escape(scalar) {
                output.append(contentsOf: string[runStart..<index]) // the Substring overload, not the generic one
                output += escaped
                runStart = next
            }
            index = next
        }
        output.append(contentsOf: string[runStart..<scalars.endIndex])
        output += "\""
    }

    /// The JSON escape of `scalar`, or `nil` when it is written as it is.
    ///
    /// Control characters (C0, DEL, C1), line separators and bidirectional controls are escaped: the
    /// text stays valid JSON and can never drive a terminal or hide text.
    @inline(__always)
    static func escape(_ scalar: Unicode.Scalar) -> String? {
        let value = scalar.value
        // The common case first: printable ASCII other than the quote and the backslash.
        if value >= 0x20 && value < 0x7F { return value == 0x22 ? "\\\"" : value == 0x5C ? "\\\\" : nil }
        switch value {
        case 0x0A: return "\\n"
        case 0x0D: return "\\r"
        case 0x09: return "\\t"
        case 0x08: return "\\b"
        case 0x0C: return "\\f"
        default:
            guard
                value < 0x20 || (0x7F...0x9F).contains(value) || (0x2028...0x2029).contains(value)
                    || JSONValue.isBidiControl(value)
            else { return nil }
            let hex = String(value, radix: 16)
            return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    /// `"text"`
    public init(stringLiteral value: String) { self = .string(value) }
    /// `42`
    public init(integerLiteral value: Int64) { self = .number(JSONNumber(value)) }
    /// `1.5`
    public init(floatLiteral value: Double) { self = .number(JSONNumber(value)) }
    /// `true`
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `[1, "a"]`
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// `nil` becomes JSON `null`.
    public init(nilLiteral: ()) { self = .null }
}
