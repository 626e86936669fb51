import numpy as np
# tune-service test: data swapped for sklearn digits (was: from keras.datasets import mnist / from keras.datasets import fashion_mnist)
from sklearn.datasets import load_digits

def _digits_as_keras_mnist():
    # Keras-MNIST-shaped stand-in: uint8 (n, 28, 28) images in 0..255 and integer labels, split
    # 1437 train / 360 test. Each 8x8 digit (values 0..16) is upscaled 3x (24x24) and zero-padded to 28x28.
    digits = load_digits()
    images = np.kron(digits.images, np.ones((1, 3, 3)))
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    images = np.round(images * (255.0 / 16.0)).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    return (images[:1437], labels[:1437]), (images[1437:], labels[1437:])
# tune-service test: end of data swap
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import OneHotEncoder

def load_and_preprocess_data(val_size=0.2, test_size=0.2, dataset = 'mnist'):
    """
    Loads MNIST, normalizes, and splits into Train, Val, and Test sets.
    """
    # 1. Load data from Keras
    if dataset == 'mnist':
        # tune-service test: data swapped for sklearn digits (was: mnist.load_data())
        (X_train_full, y_train_full), (X_test_raw, y_test_raw) = _digits_as_keras_mnist()
    elif dataset == 'fashion_mnist':
        # tune-service test: data swapped for sklearn digits (was: fashion_mnist.load_data())
        (X_train_full, y_train_full), (X_test_raw, y_test_raw) = _digits_as_keras_mnist()
        
    # 2. Reshape to 1D vectors (784) and Normalize to [0, 1]
    X_train_full = X_train_full.reshape(-1, 784).astype('float32') / 255.0
    X_test = X_test_raw.reshape(-1, 784).astype('float32') / 255.0

    # 3. One-Hot Encoding using Sklearn
    encoder = OneHotEncoder(sparse_output=False)
    y_train_full_oh = encoder.fit_transform(y_train_full.reshape(-1, 1))
    y_test_oh = encoder.transform(y_test_raw.reshape(-1, 1))

    # 4. Train-Validation Split using Sklearn
    X_train, X_val, y_train, y_val = train_test_split(
        X_train_full, 
        y_train_full_oh, 
        test_size=val_size, 
        random_state=42,
        stratify=y_train_full 
    )

    return X_train, y_train, X_val, y_val, X_test, y_test_oh