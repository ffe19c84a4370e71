public import Foundation // test support: full Foundation for string searching
public import MooseHTTP
import HTTPTypes

/// A tiny scripted browser for tests: follows redirects, keeps cookies, and fills in a provider's
/// login (and device-confirmation) forms with CSRF tokens — so integration tests log in through the
/// real provider's pages without a person. Test support only: the library never uses it.
///
/// ```swift
/// let browser = HeadlessBrowser(username: "alice", password: "wonderland-42", transport: transport)
/// let agent = try LoopbackUserAgent { url in try await browser.visit(url, stopAt: loopbackPrefix) }
/// ```
public actor HeadlessBrowser {
    private let username: String
    private let password: String
    private let transport: any HTTPTransport
    private var cookies: [String: String] = [:]
    /// Every URL visited, in order (for assertions).
    public private(set) var visited: [URL] = []

    /// A browser that signs in as `username`.
    public init(username: String, password: String, transport: any HTTPTransport) {
        self.username = username
        self.password = password
        self.transport = transport
    }

    /// Follows `url` through redirects and forms. When a redirect points at a URL starting with
    /// `stopAt` (the app's redirect URI), it requests that URL once — delivering the callback to the
    /// app's loopback receiver — and returns it.
    @discardableResult
    public func visit(_ url: URL, stopAt: String, maxSteps: Int = 12) async throws -> URL {
        var current = url
        var method = HTTPRequest.Method.get
        var body: Data? = nil
        for _ in 0..<maxSteps {
            let response = try await send(method, current, body: body)
            if ProcessInfo.processInfo.environment["MOOSE_BROWSER_DEBUG"] != nil {
                print(
                    "BROWSER \(method) \(current.path) -> \(response.status.code) \(response.headerFields[.location] ?? "") \(String(decoding: response.body.prefix(150), as: UTF8.self))"
                )
            }
            method = .get
            body = nil
            if (300..<400).contains(response.status.code), let location = response.headerFields[.location],
                let next = URL(string: location, relativeTo: current)?.absoluteURL
            {
                if next.absoluteString.hasPrefix(stopAt) {
                    _ = try await send(.get, next, body: nil)
                    return next
                }
                current = next
                continue
            }
            let html = String(decoding: response.body, as: UTF8.self)
            guard response.status.code == 200, let form = Self.firstForm(in: html) else {
                throw HTTPRequestError.transportFailure(
                    "the provider answered \(response.status.code) with no form to fill at \(current.path)",
                    APIRequest(url: current))
            }
            var fields = form.fields
            if fields.contains(where: { $0.0 == "username" }) {
                fields = fields.map {
                    $0.0 == "username" ? ($0.0, username) : $0.0 == "password" ? ($0.0, password) : $0
                }
            }
            // Confirmation forms (allow / deny): choose allow.
            if let allow = form.submits.first(where: {
                $0.1.lowercased().contains("allow") || $0.1.lowercased().contains("accept")
                    || $0.1.lowercased().contains("approve")
            }) {
                fields.append(allow)
            }
            guard
                let action = URL(
                    string: form.action.isEmpty ? current.absoluteString : form.action, relativeTo: current)?
                    .absoluteURL
            else {
                throw HTTPRequestError.transportFailure("bad form action \(form.action)", APIRequest(url: current))
            }
            current = action
            method = form.method == "get" ? .get : .post
            body = Data(RequestBuilder.encodeForm(fields).utf8)
        }
        throw HTTPRequestError.transportFailure("gave up after \(maxSteps) steps", APIRequest(url: current))
    }

    /// Fills and submits the first form of the page at `url` with `values` (for the device flow's user-code page).
    public func submitForm(at url: URL, values: [String: String], stopAt: String? = nil) async throws -> APIResponse {
        let page = try await send(.get, url, body: nil)
        guard let form = Self.firstForm(in: String(decoding: page.body, as: UTF8.self)) else {
            throw HTTPRequestError.transportFailure("no form at \(url.path)", APIRequest(url: url))
        }
        var fields = form.fields.map { field in (field.0, values[field.0] ?? field.1) }
        for (name, value) in values where !fields.contains(where: { $0.0 == name }) { fields.append((name, value)) }
        let action =
            URL(string: form.action.isEmpty ? url.absoluteString : form.action, relativeTo: url)?.absoluteURL ?? url
        return try await send(.post, action, body: Data(RequestBuilder.encodeForm(fields).utf8))
    }

    /// The page at `url` after signing in if the provider asks (follows redirects and the login form).
    public func page(_ url: URL) async throws -> (URL, String) {
        var current = url
        for _ in 0..<8 {
            let response = try await send(.get, current, body: nil)
            if (300..<400).contains(response.status.code), let location = response.headerFields[.location],
                let next = URL(string: location, relativeTo: current)?.absoluteURL
            {
                current = next
                continue
            }
            let html = String(decoding: response.body, as: UTF8.self)
            if let form = Self.firstForm(in: html), form.fields.contains(where: { $0.0 == "password" }) {
                let fields = form.fields.map {
                    $0.0 == "username" ? ($0.0, username) : $0.0 == "password" ? ($0.0, password) : $0
                }
                let action =
                    URL(string: form.action.isEmpty ? current.absoluteString : form.action, relativeTo: current)?
                    .absoluteURL ?? current
                let posted = try await send(.post, action, body: Data(RequestBuilder.encodeForm(fields).utf8))
                if let location = posted.headerFields[.location],
                    let next = URL(string: location, relativeTo: action)?.absoluteURL
                {
                    current = next
                    continue
                }
            }
            return (current, html)
        }
        throw HTTPRequestError.transportFailure("too many redirects", APIRequest(url: url))
    }

    private func send(_ method: HTTPRequest.Method, _ url: URL, body: Data?) async throws -> APIResponse {
        visited.append(url)
        var request = APIRequest(method: method, url: url, body: body, timeout: 20)
        if !cookies.isEmpty {
            request.headerFields[.cookie] = cookies.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: "; ")
        }
        if body != nil {
            request.headerFields[.contentType] = MIMEType.formURLEncoded.value
            // Django checks the Referer/Origin only over HTTPS; send it anyway, like a browser.
            request.headerFields[.referer] = url.absoluteString
        }
        let response = try await transport.send(request)
        for value in response.headerFields[values: .setCookie] {
            for cookie in Self.splitCookies(value) {
                let pair = cookie.split(separator: ";", maxSplits: 1).first ?? ""
                if let equals = pair.firstIndex(of: "=") {
                    cookies[String(pair[..<equals]).trimmingSpaces()] = String(pair[pair.index(after: equals)...])
                }
            }
        }
        return response
    }

    /// Splits a `Set-Cookie` value that a transport folded from several headers ("a=1; Path=/, b=2"),
    /// without splitting inside `Expires=Sat, 21 Nov 2026 …`.
    static func splitCookies(_ value: String) -> [String] {
        var cookies: [String] = []
        for piece in value.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = String(piece).trimmingSpaces()
            let head = trimmed.split(separator: ";", maxSplits: 1).first ?? ""
            let looksLikeCookie = head.contains("=") && !head.contains(" ")
            if looksLikeCookie || cookies.isEmpty {
                cookies.append(trimmed)
            } else {
                cookies[cookies.count - 1] += "," + piece
            }
        }
        return cookies
    }

    struct Form {
        var action = ""
        var method = "post"
        var fields: [(String, String)] = []
        var submits: [(String, String)] = []
    }

    /// The first `<form>`: its action, method, inputs (hidden values HTML-unescaped) and submit buttons.
    static func firstForm(in html: String) -> Form? {
        guard let start = html.range(of: "<form", options: .caseInsensitive) else { return nil }
        let rest = html[start.lowerBound...]
        let end = rest.range(of: "</form>", options: .caseInsensitive)?.upperBound ?? rest.endIndex
        let formHTML = String(rest[..<end])
        var form = Form()
        let openTag = String(formHTML[..<(formHTML.firstIndex(of: ">") ?? formHTML.endIndex)])
        form.action = unescape(attribute("action", in: openTag) ?? "")
        form.method = (attribute("method", in: openTag) ?? "post").lowercased()
        for tag in tags(named: ["input", "button"], in: formHTML) {
            guard let name = attribute("name", in: tag) else { continue }
            let type = (attribute("type", in: tag) ?? "text").lowercased()
            let value = unescape(attribute("value", in: tag) ?? "")
            if type == "submit" || tag.lowercased().hasPrefix("<button") {
                form.submits.append((name, value))
            } else if type != "checkbox" || tag.lowercased().contains("checked") {
                form.fields.append((name, value))
            }
        }
        return form
    }

    static func tags(named names: [String], in html: String) -> [String] {
        var result: [String] = []
        var rest = Substring(html)
        while let open = rest.firstIndex(of: "<") {
            let after = rest[rest.index(after: open)...]
            guard let close = after.firstIndex(of: ">") else { break }
            let tag = String(rest[open...close])
            if names.contains(where: { tag.lowercased().hasPrefix("<" + $0) }) { result.append(tag) }
            rest = after[after.index(after: close)...]
        }
        return result
    }

    static func attribute(_ name: String, in tag: String) -> String? {
        for quote in ["\"", "'"] {
            if let range = tag.range(of: " \(name)=\(quote)", options: .caseInsensitive) {
                let value = tag[range.upperBound...]
                if let end = value.firstIndex(of: Character(quote)) { return String(value[..<end]) }
            }
        }
        return nil
    }

    /// HTML entities in attribute values (`&amp;`, `&quot;`, numeric ones).
    static func unescape(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            let after = rest[amp...]
            guard let semi = after.firstIndex(of: ";"), after.distance(from: amp, to: semi) <= 10 else {
                out += "&"
                rest = rest[rest.index(after: amp)...]
                continue
            }
            let entity = String(after[after.index(after: amp)..<semi])
            switch entity {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos", "#39", "#x27": out += "'"
            default:
                if entity.hasPrefix("#x"), let code = UInt32(entity.dropFirst(2), radix: 16),
                    let scalar = Unicode.Scalar(code)
                {
                    out.unicodeScalars.append(scalar)
                } else if entity.hasPrefix("#"), let code = UInt32(entity.dropFirst()),
                    let scalar = Unicode.Scalar(code)
                {
                    out.unicodeScalars.append(scalar)
                } else {
                    out += "&" + entity + ";"
                }
            }
            rest = after[after.index(after: semi)...]
        }
        return out + rest
    }
}

extension String {
    func trimmingSpaces() -> String {
        var text = Substring(self)
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return String(text)
    }
}
