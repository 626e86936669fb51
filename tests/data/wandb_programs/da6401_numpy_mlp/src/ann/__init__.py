# ANN Module - Neural Network Implementation
