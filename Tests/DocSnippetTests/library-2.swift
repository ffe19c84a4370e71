// docs/library.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
import MooseOAuth
import MooseOAuthSystem

func library2(moose: TokenManager) async throws {
    // snippet begins
    var signIn = TerminalSignIn(name: "acme") // notes start "acme: …"; $BROWSER, else xdg-open
    signIn.retry = "run acme login --device again" // the app's words, ending the device code's lines
    let who = try await signIn.logIn(moose) // or signIn.logInWithDevice(moose)
    // snippet ends
    _ = who
}
