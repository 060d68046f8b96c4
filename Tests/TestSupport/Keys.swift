import PushCrypto

public enum PushCryptoKeys {
    /// A PEM RSA key nobody registered anywhere.
    public static func freshRSA() throws -> String { try PrivateKey.generateRSA().pem() }
}
