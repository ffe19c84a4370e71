import MooseOAuth

/// The small HTML pages the loopback listener shows in the browser: a title, readable text, no
/// external resources, and anything that came from outside HTML-escaped (never markup).
struct LoopbackPage {
    let title: String
    let heading: String
    let paragraphs: [String]

    static let received = LoopbackPage(
        title: "Moose — response received", heading: "Response received",
        paragraphs: ["Moose received the sign-in response. You may close this tab and return to the terminal."])
    static let stateMismatch = LoopbackPage(
        title: "Moose — not this sign-in", heading: "This response was ignored",
        paragraphs: [
            "It does not belong to the sign-in Moose is waiting for (its state does not match).",
            "If you are signing in, finish in the window Moose opened. You may close this tab."
        ])
    static let alreadyDone = LoopbackPage(
        title: "Moose — already done", heading: "Already received",
        paragraphs: ["Moose already received a sign-in response. You may close this tab."])
    static let notFound = LoopbackPage(
        title: "Moose — not found", heading: "Not found",
        paragraphs: ["Nothing is served here. You may close this tab."])
    static let badRequest = LoopbackPage(
        title: "Moose — bad request", heading: "Bad request",
        paragraphs: ["Moose could not read this request. You may close this tab."])

    static let signedIn = LoopbackPage(
        title: "Moose — signed in", heading: "Signed in",
        paragraphs: ["The sign-in is complete. You may close this tab and return to the terminal."])

    /// The code came back, but the login did not complete (the provider refused the code exchange,
    /// the ID token did not validate…): the page says so, with the provider's words, escaped.
    static func exchangeFailed(_ error: OAuthError) -> LoopbackPage {
        var paragraphs = [
            "Moose received the sign-in response, but the sign-in did not complete. Return to the terminal for details."
        ]
        if let code = error.oauthError {
            paragraphs.append("Provider's answer: " + code + (error.errorDescription.map { " — " + $0 } ?? ""))
        } else {
            paragraphs.append("Reason: " + error.message)
        }
        return LoopbackPage(title: "Moose — sign-in failed", heading: "Sign-in failed", paragraphs: paragraphs)
    }

    static func providerError(_ error: String, description: String?) -> LoopbackPage {
        var paragraphs = [
            "The identity provider did not complete the sign-in. You may close this tab and return to the terminal."
        ]
        paragraphs.append("Provider's answer: " + error + (description.map { " — " + $0 } ?? ""))
        return LoopbackPage(
            title: "Moose — sign-in did not complete", heading: "Sign-in did not complete", paragraphs: paragraphs)
    }

    var html: String {
        let body = paragraphs.map { "<p>\(Self.escape($0))</p>" }.joined()
        return "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>\(Self.escape(title))</title>"
            + "<meta name=\"viewport\" content=\"width=device-width\">"
            + "<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}"
            + "h1{font-size:1.4em}</style></head><body><h1>\(Self.escape(heading))</h1>\(body)</body></html>"
    }

    /// HTML-escapes text and drops control characters: outside words are shown, never interpreted.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(2_000) {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                    out += "\u{FFFD}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}
