#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MooseHTTP

/// Offline: a refresh fails at once with `OAuthError.offline` while the reachability says so, and
/// runs by itself when the network is back.
extension RefreshCoordinator {
    /// Throws `offline` (and arranges the postponed refresh) when the reachability says offline.
    func checkOnline() throws {
        guard let reachability = configuration.reachability, reachability.status == .offline else { return }
        postponedRefresh = true
        watchReachability(reachability)
        throw OAuthError(
            OAuthError.offline,
            "the network is unreachable: the refresh of \(key) waits for it (no refresh token was spent)")
    }

    /// Runs a postponed refresh each time the network comes back (one watcher per coordinator).
    private func watchReachability(_ reachability: any Reachability) {
        guard reachabilityWatch == nil else { return }
        let updates = reachability.updates()
        reachabilityWatch = Task { [weak self] in
            for await status in updates where status == .online {
                await self?.runPostponedRefresh()
            }
        }
    }

    /// Runs the refresh refused while offline, if one was.
    private func runPostponedRefresh() async {
        guard postponedRefresh else { return }
        postponedRefresh = false
        _ = try? await join(minimumValidity: defaultMinimumValidity, rejecting: nil)
    }
}
