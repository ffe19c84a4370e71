#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// Turns an `Endpoint` into an `APIRequest`, validating everything first: a request that cannot be
/// built correctly is an error before any I/O, never a malformed request on the wire.
public struct RequestBuilder: Sendable {
    /// Headers added to every request unless the endpoint sets them.
    public var defaultHeaders: HTTPFields
    /// The timeout when the endpoint sets none.
    public var defaultTimeout: TimeInterval
    /// Where multipart bodies are assembled (streamed to a temporary file).
    public var temporaryDirectory: URL

    /// A builder.
    public init(
        defaultHeaders: HTTPFields = [:], defaultTimeout: TimeInterval = 20,
        temporaryDirectory: URL = URL(fileURLWithPath: NSTemporaryDirectoryPath())
    ) {
        self.defaultHeaders = defaultHeaders
        self.defaultTimeout = defaultTimeout
        self.temporaryDirectory = temporaryDirectory
    }

    /// Builds the request for `endpoint`.
    ///
    /// - Throws: `HTTPRequestError.invalidRequest` naming what is wrong (missing path parameter, bad base URL,
    ///   an unreadable upload file, a body on a GET…).
    public func build(_ endpoint: some Endpoint) throws(HTTPRequestError) -> APIRequest {
        let url = try Self.url(for: endpoint)
        // Names are validated tokens and values free of line breaks by construction (`HTTPField`
        // turns CR, LF and NUL into spaces), so no endpoint can inject a header line.
        var headers = HTTPFields()
        for field in defaultHeaders where !endpoint.headerFields.contains(field.name) { headers.append(field) }
        headers.append(contentsOf: endpoint.headerFields)
        var request = APIRequest(
            method: endpoint.method, url: url, headerFields: headers, body: nil,
            timeout: endpoint.timeout ?? defaultTimeout)
        try encodeBody(endpoint.body, into: &request)
        if request.body != nil || request.bodyFile != nil, endpoint.method == .get || endpoint.method == .head {
            throw HTTPRequestError(HTTPRequestError.invalidRequest, "\(endpoint.method) request with a body")
        }
        return request
    }

    static func url(for endpoint: some Endpoint) throws(HTTPRequestError) -> URL {
        let base = endpoint.baseURL
        guard let scheme = base.scheme?.lowercased(), URLScheme(rawValue: scheme) != nil, let host = base.host,
            !host.isEmpty
        else {
            throw HTTPRequestError(
                HTTPRequestError.invalidRequest, "base URL \(base.redactedForLogs) must be absolute http(s) with a host"
            )
        }
        // Fill {placeholders}; every one must have a value, every value becomes one encoded segment.
        // A path without braces (most) is taken as it is, without the walk below.
        let template = endpoint.path
        let braced = template.utf8.contains { $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "}") }
        var path = braced ? "" : template
        var rest = braced ? Substring(template) : Substring()
        var used = Set<String>()
        while let open = rest.firstIndex(of: "{") {
            path += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw HTTPRequestError(HTTPRequestError.invalidRequest, "path \"\(endpoint.path)\" has an unclosed {")
            }
            let name = String(rest[rest.index(after: open)..<close])
            guard let value = endpoint.pathParameters[name] else {
                throw HTTPRequestError(
                    HTTPRequestError.invalidRequest, "path parameter {\(name)} of \"\(endpoint.path)\" has no value")
            }
            guard !value.isEmpty else {
                throw HTTPRequestError(HTTPRequestError.invalidRequest, "path parameter {\(name)} is empty")
            }
            path += percentEncode(value, allowed: pathSegmentAllowed)
            used.insert(name)
            rest = rest[rest.index(after: close)...]
        }
        path += rest
        if braced, path.contains("}") {
            throw HTTPRequestError(HTTPRequestError.invalidRequest, "path \"\(endpoint.path)\" has an unmatched }")
        }
        var text = base.absoluteString
        if text.hasSuffix("/") { text.removeLast() }
        if !path.isEmpty, !path.hasPrefix("/") { path = "/" + path }
        text += path
        let query = encodeQuery(endpoint.query, arrays: endpoint.arrayEncoding)
        if !query.isEmpty { text += (text.contains("?") ? "&" : "?") + query }
        guard let url = URL(string: text) else {
            throw HTTPRequestError(
                HTTPRequestError.invalidRequest,
                "cannot form a URL from \(base.redactedForLogs) and \"\(endpoint.path)\"")
        }
        return url
    }

    /// Query string per RFC 3986, with `+`, `&`, `=` and `;` encoded inside names and values.
    public static func encodeQuery(_ items: [QueryItem], arrays: ArrayEncoding) -> String {
        var pairs: [String] = []
        for item in items {
            let name = percentEncode(item.name, allowed: queryAllowed)
            if !item.isArray {
                pairs.append(name + "=" + percentEncode(item.values.first ?? "", allowed: queryAllowed))
                continue
            }
            switch arrays {
            case .repeatedKeys:
                for value in item.values { pairs.append(name + "=" + percentEncode(value, allowed: queryAllowed)) }
            case .commaSeparated:
                pairs.append(
                    name + "=" + item.values.map { percentEncode($0, allowed: queryAllowed) }.joined(separator: ","))
            case .brackets:
                for value in item.values {
                    pairs.append(name + "%5B%5D=" + percentEncode(value, allowed: queryAllowed))
                }
            }
        }
        return pairs.joined(separator: "&")
    }

    /// `application/x-www-form-urlencoded` (WHATWG URL §5.2: space becomes `+`).
    public static func encodeForm(_ fields: [(String, String)]) -> String {
        fields.map { formEncode($0.0) + "=" + formEncode($0.1) }.joined(separator: "&")
    }

    /// Decodes `application/x-www-form-urlencoded` text (a form body, or a redirect's query, which
    /// RFC 6749 Appendix B says is in this format): `+` is a space, `%XX` a byte; invalid escapes are
    /// kept as they are. Total over any input.
    ///
    /// ```swift
    /// RequestBuilder.decodeForm("error=access_denied&error_description=Not+now%21")
    /// // [("error", "access_denied"), ("error_description", "Not now!")]
    /// ```
    public static func decodeForm(_ text: String) -> [(String, String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (formDecode(parts[0]), parts.count > 1 ? formDecode(parts[1]) : "")
        }
    }

    static func formDecode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        let source = Array(text.utf8)
        var index = 0
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 0x30...0x39: byte - 0x30
            case 0x41...0x46: byte - 0x41 + 10
            case 0x61...0x66: byte - 0x61 + 10
            default: nil
            }
        }
        while index < source.count {
            let byte = source[index]
            if byte == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if byte == UInt8(ascii: "%"), index + 2 < source.count, let high = hex(source[index + 1]),
                let low = hex(source[index + 2])
            {
                bytes.append(high << 4 | low)
                index += 2
            } else {
                bytes.append(byte)
            }
            index += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// One name or value of `application/x-www-form-urlencoded` text (RFC 6749 Appendix B): a space is
    /// `+`, every byte other than ASCII letters, digits and `-._~*` is `%XX`. Also what RFC 6749 §2.3.1
    /// asks for the client id and secret before HTTP Basic authentication.
    package static func formEncode(_ text: String) -> String {
        // Spaces become "+" (encoded separately so a literal "+" stays %2B).
        text.split(separator: " ", omittingEmptySubsequences: false)
            .map { percentEncode(String($0), allowed: formAllowed) }.joined(separator: "+")
    }

    private func encodeBody(_ body: EndpointBody, into request: inout APIRequest) throws(HTTPRequestError) {
        switch body {
        case .none:
            return
        case .json(let value):
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                request.body = try encoder.encode(value)
            } catch {
                throw HTTPRequestError(HTTPRequestError.invalidRequest, "the JSON body cannot be encoded: \(error)")
            }
            setContentType(&request, .json)
        case .form(let fields):
            request.body = Data(Self.encodeForm(fields).utf8)
            setContentType(&request, .formURLEncoded)
        case .data(let data, let type):
            request.body = data
            setContentType(&request, type)
        case .file(let url, let type):
            guard FileManager.default.isReadableFile(atPath: url.path) else {
                throw HTTPRequestError(HTTPRequestError.invalidRequest, "upload file \(url.path) is not readable")
            }
            request.bodyFile = url
            setContentType(&request, type)
        case .multipart(let form):
            let file = try form.writeBody(into: temporaryDirectory)
            request.bodyFile = file
            request.removesBodyFileAfterUse = true
            setContentType(&request, MIMEType("multipart/form-data; boundary=\(form.boundary)"))
        }
    }

    private func setContentType(_ request: inout APIRequest, _ type: MIMEType) {
        if request.headerFields[.contentType] == nil { request.headerFields[.contentType] = type.value }
    }

    // RFC 3986 unreserved characters, plus what each component may carry unencoded.
    static let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
    static let pathSegmentAllowed = unreserved.union("!$'()*,:@".utf8) // no "/", ";", "=", "&", "+"
    static let queryAllowed = unreserved.union("!$'()*,:@/?".utf8) // no "&", "=", "+", ";", "#"
    static let formAllowed = unreserved.union("*".utf8)

    static func percentEncode(_ text: String, allowed: Set<UInt8>) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if allowed.contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%"
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0xF)]))
            }
        }
        return out
    }
}

/// The temporary folder (FoundationEssentials has no `NSTemporaryDirectory`).
public func NSTemporaryDirectoryPath() -> String {
    if let value = ProcessInfo.processInfo.environment["TMPDIR"], !value.isEmpty { return value }
    return "/tmp"
}
