/// Character-set checks for values from outside that end up in a header or in shell text.
///
/// - `isVisibleASCII`: RFC 6749 Appendix A's `VSCHAR` (`%x20-7E`), what a token response may carry.
/// - `isB64Token`: RFC 6750 §2.1's `b64token`, what may follow `Bearer ` (or `DPoP `) in an
///   `Authorization` header — and the only tokens Moose prints as shell text or header lines.
/// - `isHTTPToken`: RFC 9110 §5.6.2's `token`, what an authentication scheme (`token_type`) must be.
///
/// ```swift
/// TokenCharacters.isB64Token("mF_9.B5f-4.1JqM")            // true
/// TokenCharacters.isB64Token("x'; touch /tmp/p; echo '")    // false
/// ```
public enum TokenCharacters {
    /// The longest token accepted from a token response (64 KiB).
    public static let maximumTokenLength = 65_536

    /// Non-empty, and every byte in `%x20-7E`.
    public static func isVisibleASCII(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E }
    }

    /// `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="` (RFC 6750 §2.1).
    ///
    /// Runs on every authorized request (`checkedAuthorizationHeader()`): it scans the string's
    /// contiguous UTF-8 (no copy for a native string), not the `utf8` view byte by byte.
    public static func isB64Token(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            let count = bytes.count
            var index = 0
            while index < count, isB64Body(bytes[index]) { index += 1 }
            guard index > 0 else { return false }
            while index < count, bytes[index] == 0x3D { index += 1 }
            return index == count
        }
    }

    /// `ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/"`.
    @inline(__always)
    static func isB64Body(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E || byte == 0x2B
            || byte == 0x2F
    }

    /// Non-empty, and every byte an RFC 9110 `tchar`.
    public static func isHTTPToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy(isTokenByte)
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }
}
