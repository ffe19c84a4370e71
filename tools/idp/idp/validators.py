"""The test IdP's claims: like many providers, the ID token carries only `sub`, and the UserInfo
endpoint adds the names a person knows (preferred_username with `profile`, name with `profile`,
email with `email`) — so Moose's "ID token, else UserInfo" display name is exercised for real."""
from oauth2_provider.oauth2_validators import OAuth2Validator


class MooseValidator(OAuth2Validator):
    def get_userinfo_claims(self, request):
        claims = super().get_userinfo_claims(request)
        user = request.user
        if "profile" in request.scopes:
            claims["preferred_username"] = user.username
            claims["name"] = user.get_full_name()
        if "email" in request.scopes:
            claims["email"] = user.email
        return claims
