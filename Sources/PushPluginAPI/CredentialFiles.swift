import Foundation
import PushCrypto
import PushCore

/// Start-up checks that credential files exist and parse, so a bad secret stops the worker with
/// one clear line instead of failing every push later.
public enum CredentialFiles {
    /// A PEM private key (an APNs `.p8` file is one). `place` names where the path came from.
    public static func signingKey(at path: String, place: String, reader: inout SettingsReader) -> Bool {
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

    /// A secret kept in a file (a password, a client secret): its text without the trailing newline.
    public static func secret(at path: String, place: String, reader: inout SettingsReader) -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            reader.problem("\(place): \(path) does not exist or is not readable")
            return nil
        }
        let secret = text.trimmingCharacters(in: .newlines)
        guard !secret.isEmpty else {
            reader.problem("\(place): \(path) is empty")
            return nil
        }
        return secret
    }
}

extension JSONValue {
    /// A non-empty string member of an object, for `PUSH_APPS_FILE` entries.
    public func nonEmptyString(_ name: String) -> String? {
        if case .string(let text)? = self[name], !text.isEmpty { text } else { nil }
    }
}
