#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `multipart/form-data` body (RFC 7578). File parts are copied from disk in 64 KiB chunks into a
/// temporary body file that the transport uploads as a stream: a 5 GiB file never sits in memory.
///
/// ```swift
/// var form = MultipartForm()
/// form.add(field: "title", value: "Holiday")
/// form.add(file: URL(fileURLWithPath: "/tmp/photo.jpg"), name: "photo", type: "image/jpeg")
/// ```
public struct MultipartForm: Sendable {
    enum Part: Sendable {
        case field(name: String, value: String)
        case data(name: String, filename: String?, data: Data, type: MIMEType)
        case file(name: String, filename: String, url: URL, type: MIMEType)
    }

    var parts: [Part] = []
    /// The boundary (random).
    public let boundary: String

    /// An empty form with a random boundary.
    public init() {
        var generator = SystemRandomNumberGenerator()
        boundary =
            "moose-" + (0..<24).map { _ in String("0123456789abcdef".randomElement(using: &generator)!) }.joined()
    }

    /// A text field.
    public mutating func add(field name: String, value: String) { parts.append(.field(name: name, value: value)) }

    /// In-memory bytes as a file part.
    public mutating func add(data: Data, name: String, filename: String? = nil, type: MIMEType = .octetStream) {
        parts.append(.data(name: name, filename: filename, data: data, type: type))
    }

    /// A file part, streamed from disk when the body is written.
    public mutating func add(file url: URL, name: String, filename: String? = nil, type: MIMEType = .octetStream) {
        parts.append(.file(name: name, filename: filename ?? url.lastPathComponent, url: url, type: type))
    }

    static func quoted(_ text: String) -> String {
        // RFC 7578 §4.2: percent-encode the quote and line breaks inside the quoted string.
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "%22"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Writes the whole body to a new temporary file and returns its URL.
    func writeBody(into folder: URL) throws(HTTPRequestError) -> URL {
        let url = folder.appendingPathComponent("moose-multipart-\(boundary).body")
        let fd = open(url.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw HTTPRequestError(
                HTTPRequestError.invalidRequest, "cannot create a temporary body file in \(folder.path)")
        }
        defer { close(fd) }
        func emit(_ bytes: some Collection<UInt8>) throws(HTTPRequestError) {
            var array = Array(bytes)
            var offset = 0
            while offset < array.count {
                let written = array.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else {
                    throw HTTPRequestError(HTTPRequestError.invalidRequest, "cannot write the multipart body")
                }
                offset += written
            }
        }
        for part in parts {
            try emit(Array("--\(boundary)\r\n".utf8))
            switch part {
            case .field(let name, let value):
                try emit(Array("Content-Disposition: form-data; name=\(Self.quoted(name))\r\n\r\n".utf8))
                try emit(Array(value.utf8))
            case .data(let name, let filename, let data, let type):
                let file = filename.map { "; filename=\(Self.quoted($0))" } ?? ""
                try emit(
                    Array(
                        "Content-Disposition: form-data; name=\(Self.quoted(name))\(file)\r\nContent-Type: \(type.value)\r\n\r\n"
                            .utf8))
                try emit(data)
            case .file(let name, let filename, let source, let type):
                try emit(
                    Array(
                        "Content-Disposition: form-data; name=\(Self.quoted(name)); filename=\(Self.quoted(filename))\r\nContent-Type: \(type.value)\r\n\r\n"
                            .utf8))
                let input = open(source.path, O_RDONLY | O_CLOEXEC)
                guard input >= 0 else {
                    throw HTTPRequestError(HTTPRequestError.invalidRequest, "cannot read upload file \(source.path)")
                }
                defer { close(input) }
                var chunk = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = chunk.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    guard count >= 0 else {
                        throw HTTPRequestError(
                            HTTPRequestError.invalidRequest, "cannot read upload file \(source.path)")
                    }
                    if count == 0 { break }
                    try emit(chunk[0..<count])
                }
            }
            try emit(Array("\r\n".utf8))
        }
        try emit(Array("--\(boundary)--\r\n".utf8))
        return url
    }
}
