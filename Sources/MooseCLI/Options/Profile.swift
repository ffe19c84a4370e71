import MooseOAuth
import MooseHTTP
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A named CLI configuration — a profile — is the library's `SessionPlan` under the profile's name:
/// which provider, which client and how it authenticates (by reference), which scopes and grant.
/// Kept sealed in its session's row, so an app's `TokenManager.open(key:…)` renews a CLI session (and
/// `moose token` an app's) the same way.
typealias Profile = SessionPlan
