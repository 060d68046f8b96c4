import Foundation
import PushCrypto

/// Start-up checks that credential files exist and parse, so a bad secret stops the
/// worker with one clear line instead of failing every push later.
enum CredentialCheck {
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
