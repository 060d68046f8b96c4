import FCMPlugin
import Foundation
import PushCrypto

/// Start-up checks that credential files exist and parse, so a bad secret stops the
/// worker with one clear line instead of failing every push later.
enum CredentialCheck {
    static func serviceAccount(at path: String, place: String, reader: inout EnvironmentReader) -> ServiceAccount? {
        do {
            let account = try ServiceAccount(contentsOfFile: path)
            _ = try PrivateKey(pem: account.privateKeyPEM)
            return account
        } catch let invalid as ServiceAccount.Invalid {
            reader.problem("\(place): service-account file \(path): \(invalid)")
        } catch {
            reader.problem("\(place): service-account file \(path): private_key is not a PEM private key")
        }
        return nil
    }

    static func signingKey(at path: String, place: String, reader: inout EnvironmentReader) -> Bool {
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
            reader.problem("\(place): key file \(path) does not exist or is not readable")
            return false
        }
        do {
            _ = try PrivateKey(pem: pem)
            return true
        } catch {
            reader.problem("\(place): key file \(path) is not a PEM private key (an APNs .p8 file is one)")
            return false
        }
    }
}
