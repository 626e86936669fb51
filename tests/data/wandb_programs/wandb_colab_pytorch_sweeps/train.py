# Assembled from the code cells of wandb/examples
# colabs/pytorch/Organizing_Hyperparameter_Sweeps_in_PyTorch_with_W&B.ipynb
# (cells 6, 29, 31 verbatim; see SOURCE.md for the cells left out and why).

import wandb

import torch
import torch.optim as optim
import torch.nn.functional as F
import torch.nn as nn
# tune-service test: data swapped for sklearn digits (was: from torchvision import datasets, transforms)
from sklearn.datasets import load_digits
# tune-service test: end of data swap

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def train(config=None):
    # Initialize a new wandb run
    with wandb.init(config=config):
        # If called by wandb.agent, as below,
        # this config will be set by Sweep Controller
        config = wandb.config

        loader = build_dataset(config.batch_size)
        network = build_network(config.fc_layer_size, config.dropout)
        optimizer = build_optimizer(network, config.optimizer, config.learning_rate)

        for epoch in range(config.epochs):
            avg_loss = train_epoch(network, loader, optimizer)
            wandb.log({"loss": avg_loss, "epoch": epoch})

def build_dataset(batch_size):
   
    # tune-service test: data swapped for sklearn digits (was: transforms.Compose([ToTensor(), Normalize((0.1307,), (0.3081,))])
    # and datasets.MNIST(".", train=True, download=True, transform=transform), the 60k MNIST download).
    # Digits 8x8 -> 1x28x28 (bilinear), scaled to [0,1], normalized with (0.1307,), (0.3081,); labels int64.
    _digits = load_digits()
    _images = torch.tensor(_digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    _images = F.interpolate(_images, size=(28, 28), mode="bilinear", align_corners=False)
    _images = (_images - 0.1307) / 0.3081
    dataset = torch.utils.data.TensorDataset(_images, torch.tensor(_digits.target, dtype=torch.long))
    # tune-service test: end of data swap
    sub_dataset = torch.utils.data.Subset(
        dataset, indices=range(0, len(dataset), 5))
    loader = torch.utils.data.DataLoader(sub_dataset, batch_size=batch_size)

    return loader


def build_network(fc_layer_size, dropout):
    network = nn.Sequential(  # fully-connected, single hidden layer
        nn.Flatten(),
        nn.Linear(784, fc_layer_size), nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(fc_layer_size, 10),
        nn.LogSoftmax(dim=1))

    return network.to(device)
        

def build_optimizer(network, optimizer, learning_rate):
    if optimizer == "sgd":
        optimizer = optim.SGD(network.parameters(),
                              lr=learning_rate, momentum=0.9)
    elif optimizer == "adam":
        optimizer = optim.Adam(network.parameters(),
                               lr=learning_rate)
    return optimizer


def train_epoch(network, loader, optimizer):
    cumu_loss = 0
    for _, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()

        # ➡ Forward pass
        loss = F.nll_loss(network(data), target)
        cumu_loss += loss.item()

        # ⬅ Backward pass + weight update
        loss.backward()
        optimizer.step()

        wandb.log({"batch loss": loss.item()})

    return cumu_loss / len(loader)


# tune-service test: notebook cell 34 `wandb.agent(sweep_id, train, count=5)` (the in-notebook agent)
# replaced by a direct call, as a `program:` run by the W&B CLI agent (`wandb agent`) would do.
train()
