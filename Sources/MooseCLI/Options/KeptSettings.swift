import MooseOAuth
import MooseOAuthSystem

/// `moose`'s kept plans (`KeptPlans`, MooseOAuthSystem): `profiles.json` in the folder of the config
/// file (`$MOOSE_CONFIG`, else `$XDG_CONFIG_HOME/moose/`), one section per store, written by `moose
/// login` and left by a logout, a lost master key or a damaged row, so a plain `moose login --profile P`
/// logs in the same way again after any of them. Read for a new login only: a renewal follows the plan
/// sealed with the session.
enum KeptSettings {
    /// The file, beside the config file.
    static var file: KeptPlans {
        get throws { KeptPlans.besideConfig(try CLIConfig.path) }
    }

    /// The file's path.
    static var path: String {
        get throws { try file.path }
    }

    /// The profiles kept for `store`, by name (each named as its key); none when the config's folder
    /// cannot be named or the file cannot be read.
    static func profiles(store: StoreOptions) -> [String: Profile] {
        guard let file = try? file, let location = try? store.resolvedStorePath else { return [:] }
        return file.plans(forStore: location)
    }

    /// The settings `profile` last logged in with on `store`, if kept.
    static func plan(_ profile: String, store: StoreOptions) -> Profile? { profiles(store: store)[profile] }

    /// Keeps `plan` and says nothing on success; a file that cannot be written is said on standard
    /// error (the login itself succeeded: its session is in the store). Without a config folder (no
    /// `HOME`: the store and key given as options) the plan stays only with the session.
    static func keep(_ plan: Profile, store: StoreOptions) {
        guard let file = try? file else { return }
        do { try file.keep(plan, forStore: try store.resolvedStorePath) } catch {
            let message = (error as? OAuthError)?.message ?? String(describing: error)
            Terminal.error("moose: warning: \(message) (the login itself succeeded)")
        }
    }
}
