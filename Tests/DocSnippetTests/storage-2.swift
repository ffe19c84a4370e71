// docs/storage.md, ```swift block 2: the region is quoted there word for word (DocSnippetTests).
import MooseOAuth

func storage2(moose: TokenManager) async {
    // snippet begins
    let result = await moose.logout()
    if result.hadSession, result.revocationError?.code == OAuthError.sessionDamaged {
        print("the damaged session is gone: there were no tokens to revoke")
    }
    // snippet ends
}
