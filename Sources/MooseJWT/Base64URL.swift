/// Strict base64url (RFC 4648 §5) without padding, as JOSE requires (RFC 7515 §2).
///
/// Decoding rejects padding, the `+`/`/` alphabet, whitespace, and non-canonical trailing bits,
/// and reports the offset of the first offending character.
///
/// ```swift
/// let bytes = try Base64URL.decode("eyJhbGciOiJIUzI1NiJ9")
/// let text = Base64URL.encode(Array("{}".utf8))   // "e30"
/// ```
public enum Base64URL {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let table: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Encodes `bytes` without padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output = [UInt8]()
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = iterator.next()
            output.append(alphabet[Int(b0 >> 2)])
            output.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 { output.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)]) }
            if let b2 { output.append(alphabet[Int(b2 & 0x3F)]) }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes a base64url string.
    ///
    /// - Throws: `JWTError.invalidBase64URL` with the offset of the first bad character.
    public static func decode(_ text: String) throws(JWTError) -> [UInt8] {
        var text = text
        return try typed { try text.withUTF8 { buffer in try decode(buffer, offset: 0) } }
    }

    /// Decodes base64url bytes; `offset` is added to positions in errors (the part's place in a token).
    static func decode(_ input: UnsafeBufferPointer<UInt8>, offset: Int, part: String = "input") throws(JWTError)
        -> [UInt8]
    {
        let count = input.count
        if count % 4 == 1 {
            throw JWTError(
                JWTError.invalidBase64URL,
                "\(part) has an impossible base64url length (\(count) characters)", position: offset + count - 1)
        }
        var output = [UInt8](repeating: 0, count: count * 3 / 4)
        let table = Self.table
        try typed {
            try table.withUnsafeBufferPointer { table in
                try output.withUnsafeMutableBufferPointer { out in
                    var o = 0
                    var i = 0
                    @inline(__always) func value(_ index: Int) throws(JWTError) -> UInt32 {
                        let character = input[index]
                        let v = table[Int(character)]
                        if v == 0xFF { throw badCharacter(character, at: offset + index, part: part) }
                        return UInt32(v)
                    }
                    while i + 4 <= count {
                        let n = try value(i) << 18 | value(i + 1) << 12 | value(i + 2) << 6 | value(i + 3)
                        out[o] = UInt8(truncatingIfNeeded: n >> 16)
                        out[o + 1] = UInt8(truncatingIfNeeded: n >> 8)
                        out[o + 2] = UInt8(truncatingIfNeeded: n)
                        o += 3
                        i += 4
                    }
                    let remaining = count - i
                    if remaining == 2 {
                        let n = try value(i) << 18 | value(i + 1) << 12
                        if n & 0xFFFF != 0 { throw nonCanonical(at: offset + i + 1, part: part) }
                        out[o] = UInt8(truncatingIfNeeded: n >> 16)
                    } else if remaining == 3 {
                        let n = try value(i) << 18 | value(i + 1) << 12 | value(i + 2) << 6
                        if n & 0xFF != 0 { throw nonCanonical(at: offset + i + 2, part: part) }
                        out[o] = UInt8(truncatingIfNeeded: n >> 16)
                        out[o + 1] = UInt8(truncatingIfNeeded: n >> 8)
                    }
                }
            }
        }
        return output
    }

    private static func badCharacter(_ character: UInt8, at position: Int, part: String) -> JWTError {
        let shown: String
        switch character {
        case UInt8(ascii: "="): shown = "padding '='"
        case UInt8(ascii: "+"), UInt8(ascii: "/"):
            shown = "'\(Character(Unicode.Scalar(character)))' (standard base64, not base64url)"
        case 0x21...0x7E: shown = "'\(Character(Unicode.Scalar(character)))'"
        case 0x20, 0x09, 0x0A, 0x0D: shown = "whitespace"
        default: shown = "byte 0x\(String(character, radix: 16))"
        }
        return JWTError(JWTError.invalidBase64URL, "\(part) has \(shown) at offset \(position)", position: position)
    }

    private static func nonCanonical(at position: Int, part: String) -> JWTError {
        JWTError(
            JWTError.invalidBase64URL,
            "\(part) has non-zero trailing bits at offset \(position) (non-canonical base64url)",
            position: position)
    }
}
