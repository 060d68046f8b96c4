import Foundation
import PushCrypto
import PushCore
import PushHTTP

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

    /// The CA bundle a setting names (`PUSH_…_CA_FILE`), read once (`CredentialFile`: a regular file of at most 1 MiB) and
    /// parsed as the connections will use it; nil with a problem line when it is refused or holds no PEM certificate.
    public static func certificateAuthority(_ setting: Setting, reader: inout SettingsReader) -> CredentialFile? {
        guard let file = tlsFile(setting, reader: &reader) else { return nil }
        guard tls(TLSOptions(caFile: file), place: setting.name, reader: &reader) else { return nil }
        return file
    }

    /// A TLS file a setting names, read once (`CredentialFile`); nil with a problem line when it is refused. Whether it
    /// parses is for `tls(_:place:reader:)`, once the options it belongs to are whole.
    public static func tlsFile(_ setting: Setting, reader: inout SettingsReader) -> CredentialFile? {
        guard let path = reader.readableFile(setting) else { return nil }
        let file = CredentialFile(reading: path)
        if let problem = file.problem {
            reader.problem("\(setting.name): \(problem)")
            return nil
        }
        return file
    }

    /// Whether `options` make a TLS client context of the bytes they carry (every file read, the CA bundle and
    /// certificate parse, the key opens with its password and matches the certificate); a problem line if not.
    public static func tls(_ options: TLSOptions, place: String, reader: inout SettingsReader) -> Bool {
        guard let problem = options.problem else { return true }
        reader.problem("\(place): \(problem)")
        return false
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
