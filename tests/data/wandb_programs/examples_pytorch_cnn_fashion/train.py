#!/usr/bin/env python

"""
Builds a convolutional neural network on the fashion mnist data set.

Designed to show wandb integration with pytorch.
"""

import torch
import torch.nn as nn
# tune-service test: data swapped for sklearn digits (was: import torchvision.transforms as transforms / import torchvision.datasets as dsets)
from sklearn.datasets import load_digits
# tune-service test: end of data swap
from torch.autograd import Variable
import torch.nn.functional as F
# tune-service test: data swapped for sklearn digits (was: from fashion_data import fashion)
# tune-service test: end of data swap

import wandb
import os

hyperparameter_defaults = dict(
    dropout = 0.5,
    channels_one = 16,
    channels_two = 32,
    batch_size = 100,
    learning_rate = 0.001,
    epochs = 2,
    )

wandb.init(config=hyperparameter_defaults, project="pytorch-cnn-fashion")
config = wandb.config

class CNNModel(nn.Module):
    def __init__(self):
        super(CNNModel, self).__init__()

        # Convolution 1
        self.cnn1 = nn.Conv2d(in_channels=1, out_channels=config.channels_one, kernel_size=5, stride=1, padding=0)
        self.relu1 = nn.ReLU()
        # Max pool 1
        self.maxpool1 = nn.MaxPool2d(kernel_size=2)

        # Convolution 2
        self.cnn2 = nn.Conv2d(in_channels=config.channels_one, out_channels=config.channels_two, kernel_size=5, stride=1, padding=0)
        self.relu2 = nn.ReLU()

        # Max pool 2
        self.maxpool2 = nn.MaxPool2d(kernel_size=2)

        self.dropout = nn.Dropout(p=config.dropout)

        # Fully connected 1 (readout)
        self.fc1 = nn.Linear(config.channels_two*4*4, 10)

    def forward(self, x):
        # Convolution 1
        out = self.cnn1(x)
        out = self.relu1(out)

        # Max pool 1
        out = self.maxpool1(out)

        # Convolution 2
        out = self.cnn2(out)
        out = self.relu2(out)

        # Max pool 2
        out = self.maxpool2(out)

        # Resize
        # Original size: (100, 32, 7, 7)
        # out.size(0): 100
        # New out size: (100, 32*7*7)
        out = out.view(out.size(0), -1)
        out = self.dropout(out)
        # Linear function (readout)
        out = self.fc1(out)

        return out

def main():
    # tune-service test: data swapped for sklearn digits (was: torchvision Normalize/ToTensor transforms and
    # fashion(root='./data', train=True, download=True) / fashion(root='./data', train=False), i.e. the
    # 60k/10k Fashion-MNIST download). Digits 8x8 -> 1x28x28 (bilinear), scaled to [0,1] and normalized with
    # the published (0.1307,), (0.3081,); 1437 train / 360 test samples, labels as int64 tensors.
    _digits = load_digits()
    _images = torch.tensor(_digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    _images = F.interpolate(_images, size=(28, 28), mode='bilinear', align_corners=False)
    _images = (_images - 0.1307) / 0.3081
    _labels = torch.tensor(_digits.target, dtype=torch.long)
    train_dataset = torch.utils.data.TensorDataset(_images[:1437], _labels[:1437])
    test_dataset = torch.utils.data.TensorDataset(_images[1437:], _labels[1437:])
    # tune-service test: end of data swap

    label_names = [
        "T-shirt or top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Boot"]

    train_loader = torch.utils.data.DataLoader(dataset=train_dataset,
                                               batch_size=config.batch_size,
                                               shuffle=True)

    test_loader = torch.utils.data.DataLoader(dataset=test_dataset,
                                              batch_size=config.batch_size,
                                              shuffle=False)


    model = CNNModel()
    wandb.watch(model)

    criterion = nn.CrossEntropyLoss()

    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)

    iter = 0
    for epoch in range(config.epochs):
        for i, (images, labels) in enumerate(train_loader):

            images = Variable(images)
            labels = Variable(labels)

            # Clear gradients w.r.t. parameters
            optimizer.zero_grad()

            # Forward pass to get output/logits
            outputs = model(images)

            # Calculate Loss: softmax --> cross entropy loss
            loss = criterion(outputs, labels)

            # Getting gradients w.r.t. parameters
            loss.backward()

            # Updating parameters
            optimizer.step()

            iter += 1

            if iter % 100 == 0:
                # Calculate Accuracy
                correct = 0.0
                correct_arr = [0.0] * 10
                total = 0.0
                total_arr = [0.0] * 10

                # Iterate through test dataset
                for images, labels in test_loader:
                    images = Variable(images)

                    # Forward pass only to get logits/output
                    outputs = model(images)

                    # Get predictions from the maximum value
                    _, predicted = torch.max(outputs.data, 1)

                    # Total number of labels
                    total += labels.size(0)
                    correct += (predicted == labels).sum()

                    for label in range(10):
                        correct_arr[label] += (((predicted == labels) & (labels==label)).sum())
                        total_arr[label] += (labels == label).sum()

                accuracy = correct / total

                metrics = {'accuracy': accuracy, 'loss': loss}
                for label in range(10):
                    metrics['Accuracy ' + label_names[label]] = correct_arr[label] / total_arr[label]

                wandb.log(metrics)

                # Print Loss
                print('Iteration: {0} Loss: {1:.2f} Accuracy: {2:.2f}'.format(iter, loss, accuracy))
    torch.save(model.state_dict(), os.path.join(wandb.run.dir, "model.pt"))

if __name__ == '__main__':
   main()
